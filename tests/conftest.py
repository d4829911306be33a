"""Shared fixtures. ``shared_dir`` points at ../shared when present (optional tests skip without it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests: no deadline (CI is a loaded 2-core VM: time is not a property), derandomized so a CI failure
# reproduces, no example database written into the repository. "mutation" runs fewer examples per mutant.
settings.register_profile("ci", deadline=None, derandomize=True, database=None, max_examples=60)
settings.register_profile("mutation", deadline=None, derandomize=True, database=None, max_examples=30)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def shared_dir() -> Path:
    if not (SHARED / "traces").is_dir():
        pytest.skip("../shared is absent (optional tests on the real traces and corpus)")
    return SHARED


@pytest.fixture
def cli():
    """Invoke the kvbench CLI in-process; returns click's Result."""
    from click.testing import CliRunner

    from kvbench.cli import main

    runner = CliRunner()

    def run(*args, input=None):
        return runner.invoke(main, [str(a) for a in args], input=input, catch_exceptions=False)

    return run


@pytest.fixture(autouse=True, scope="session")
def _trace_cache_dir(tmp_path_factory):
    """Trace ingest caches go to a scratch folder for the session, never the user's ~/.cache."""
    import os

    old = os.environ.get("KVBENCH_CACHE_DIR")
    os.environ["KVBENCH_CACHE_DIR"] = str(tmp_path_factory.mktemp("kvbench-cache"))
    yield
    if old is None:
        os.environ.pop("KVBENCH_CACHE_DIR", None)
    else:
        os.environ["KVBENCH_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray cluster of two nodes (one CPU each) on this machine."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=1)
    ray.init(address=c.address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    c.wait_for_nodes()
    yield c.address
    ray.shutdown()
    c.shutdown()
