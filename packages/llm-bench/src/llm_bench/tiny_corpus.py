"""The English text the tiny models' BPE vocabularies are learned from (written for this package)."""

TINY_CORPUS = """\
The little robot woke up before the sun. It rolled out of the garage, checked the weather, and decided that today
was a good day to learn something new. The town was quiet. A baker was opening the shop on the corner, and the smell
of fresh bread drifted over the street. The robot stopped to watch the baker shape the dough into long loaves.

"What are you making?" asked the robot.
"Bread for the morning," said the baker. "Would you like to help?"

The robot had never made bread. It measured the flour, the water, the salt and the yeast, and it counted every
second while the dough rested. When the first loaves came out of the oven, the robot wrote down the time, the
temperature and the weight of each one. The baker laughed. "You do not need to measure everything. Sometimes you
just have to taste it."

In the afternoon the robot walked to the library. It read about rivers and mountains, about numbers and stars,
about people who built bridges and people who wrote songs. It learned that a bridge must carry more than its own
weight, that a song can be sad and happy at the same time, and that there are more stars in the sky than grains of
sand on the beach. It read until the light turned orange and the library closed its doors.

On the way home the robot passed the bakery again. The shop was dark, but a single loaf waited on the step with a
note: "For the robot who counts the seconds." The robot did not know how to taste bread, so it kept the note instead.
It was the best thing it had learned all day: that the people of the town were kind, and that tomorrow there would
be something new to learn again.
"""
