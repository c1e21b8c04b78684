"""The model zoo (zoo.py) on tpu against CPU: forward, one AdamW training
step (loss, gradients, updates), greedy generation for language models, and
no CPU fallback. Run by `make models` (not by `make test`)."""
import pytest

pytest.importorskip("transformers", reason="the model zoo needs requirements-models.txt "
                    "(`make models` installs it)")

import os  # noqa: E402

import zoo  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def zoo_table():
    """With TORCHTPU_ZOO_TABLE=path (set by `make models`), writes the
    results of the run (also test_minilm.py's) there as Markdown at the end
    of the session."""
    yield
    path = os.environ.get("TORCHTPU_ZOO_TABLE")
    if path and zoo.RESULTS:
        with open(path, "w") as f:
            f.write(zoo.table(zoo.RESULTS, extra=[""] + zoo.EXTRA if zoo.EXTRA else (),
                              seconds=zoo.elapsed()))


@pytest.mark.parametrize("spec", zoo.ZOO, ids=[s.name for s in zoo.ZOO])
def test_model(spec):
    try:
        res = zoo.run(spec)
    except Exception as e:
        zoo.RESULTS.append((spec.name, spec.kind, f"{type(e).__name__}: {e}"[:200]))
        raise
    zoo.RESULTS.append(res)
    bad = zoo.failures(res)
    assert not bad, f"{spec.name}: " + "; ".join(bad)


def test_zoo_covers_the_families():
    kinds = {}
    for s in zoo.ZOO:
        kinds[s.kind] = kinds.get(s.kind, 0) + 1
    assert len(zoo.ZOO) >= 20 and set(kinds) == {
        "encoder", "decoder", "encoder-decoder", "vision", "audio"}, kinds
