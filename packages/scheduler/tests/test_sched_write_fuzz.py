"""The differential write fuzzer (tests/write_fuzz.py) in the default suite: random programs of views, writes, calls
(`@function`, with captures, precompiled) and realizes over tensors that share buffers, run on `Tensor` and on numpy;
every live handle must end with numpy's values.
benchmarks/write_fuzz_soak.py runs thousands of seeded programs the same way."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from write_fuzz import HypothesisChooser, generate, generate_from, run


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.data())
def test_random_write_programs_match_numpy(data):
    program = generate_from(HypothesisChooser(data), calls=True)
    mismatch = run(program)
    assert mismatch is None, str(mismatch)


def test_seeded_programs_match_numpy():
    # the soak script's first seeds: the same generator as benchmarks/write_fuzz_soak.py
    for seed in range(100):  # with the 200 above, 300 programs per run (the soak script runs 10,000)
        mismatch = run(generate(seed, calls=True))
        assert mismatch is None, str(mismatch)
