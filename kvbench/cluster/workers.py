"""Run jobs on workers: local processes (one per job) or Ray actors (one per job, placed by a placement group).

A job is ``(function path "module:name", payload dict)``; the function runs on the worker and returns a dict
(picklable: numbers, strings, bytes of result files). A worker that dies (killed process, lost Ray node or
actor) yields a :class:`Lost` in its place; the other jobs' results are kept. Ray is optional
(``pip install 'kvbench[cluster]'``); every Ray error a user can cause is a one-line error before any job runs.
"""

from __future__ import annotations

import importlib
import os
import socket
import time
from dataclasses import dataclass

from kvbench.errors import DependencyError, UsageError

START_DELAY_S = 1.0         # Ray actors start their jobs together at (ready time + this)
RAY_TIMEOUT_S = 30.0        # connecting to a Ray cluster (--ray-timeout sets it): a port that is not Ray hangs ray.init
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])   # + an empty SETTINGS


def set_ray_timeout(seconds: float) -> None:
    global RAY_TIMEOUT_S
    RAY_TIMEOUT_S = float(seconds)


@dataclass(frozen=True)
class Lost:
    """A job whose worker died: which one, where, and what Ray or the OS said."""

    index: int
    error: str
    host: str | None = None


def call(fn: str, payload: dict, start_at: float | None = None, die: bool = False) -> dict:
    """Run ``module:function(payload)`` here (on the worker); ``die`` is a test hook: exit at once."""
    if die:
        os._exit(17)                      # a worker lost mid-run, as a killed process or a dead host
    if start_at is not None:
        time.sleep(max(0.0, start_at - time.time()))
    mod, _, name = fn.partition(":")
    out = getattr(importlib.import_module(mod), name)(payload)
    return {"host": socket.gethostname(), **out}


# --- local processes ---------------------------------------------------------------------------------------
def _child(conn, fn, payload, die, parent_pid=None):
    """A node process: dies with the parent (kvbench.procs), stops like a command on SIGINT/SIGTERM/SIGHUP (the
    replay drains and records ``interrupted``), never prints a traceback (a parent gone: nothing to tell)."""
    from kvbench import procs

    try:
        procs.child_init(parent_pid)
        msg = ("ok", call(fn, payload, die=die))
    except BaseException as e:  # noqa: BLE001 - sent to the parent as the job's failure
        msg = ("error", f"{type(e).__name__}: {e}")
    try:
        conn.send(msg)
    except (OSError, EOFError, KeyboardInterrupt):    # the parent is gone or stopping: exit quietly
        pass
    finally:
        conn.close()


def run_local(jobs: list[tuple[str, dict]], die: int | None = None) -> list:
    """Each job in its own process, all at once; results in job order (``Lost`` for a dead one). Spawned, not
    forked: the parent may hold threads (a Ray driver, BLAS pools) that a fork would copy mid-lock."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    procs = []
    try:
        for i, (fn, payload) in enumerate(jobs):
            recv, send = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_child, args=(send, fn, payload, die == i, os.getpid()), name=f"kvbench-node-{i}")
            p.start()
            send.close()
            procs.append((p, recv))
        return _collect(procs)
    except BaseException as e:       # stopped (a signal) or failed: no node process outlives this call
        e.partial_results = _end(procs)   # what the nodes measured before they drained (read by run_nodes)
        raise


def _end(procs, grace_s: float = 20.0) -> list:
    """SIGTERM every node process still running (each drains and sends its ``interrupted`` result), collect what
    arrives within ``grace_s``, then SIGKILL the rest; results in job order (``Lost`` where none came)."""
    for p, _ in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + grace_s
    out = []
    for i, (p, recv) in enumerate(procs):
        res = Lost(i, "stopped before it returned", socket.gethostname())
        try:
            if recv.poll(max(0.0, deadline - time.monotonic())):
                kind, value = recv.recv()
                res = value if kind == "ok" else {"status": "failed", "error": value, "host": socket.gethostname()}
        except (EOFError, OSError):
            pass
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
        out.append(res)
    return out


def _collect(procs) -> list:
    out = []
    for i, (p, recv) in enumerate(procs):
        try:
            kind, value = recv.recv()
        except EOFError:
            kind, value = "lost", None
        p.join()
        if kind == "ok":
            out.append(value)
        elif kind == "error":
            out.append({"status": "failed", "error": value, "host": socket.gethostname()})
        else:
            out.append(Lost(i, f"worker process exited with code {p.exitcode} before returning",
                            socket.gethostname()))
    return out


# --- Ray -----------------------------------------------------------------------------------------------------
def import_ray():
    try:
        import ray
    except ImportError:
        raise DependencyError("--ray-address needs Ray, which is not installed",
                              "pip install 'kvbench[cluster]' (or .ci/install)") from None
    return ray


def check_address(address: str, timeout_s: float | None = None) -> None:
    """Refuse a Ray address that cannot be reached, or whose port does not answer as Ray's GCS (a gRPC server:
    an HTTP/2 SETTINGS frame in reply to the client preface) within ``timeout_s`` (default --ray-timeout)."""
    if address in ("auto", "local"):
        return
    timeout_s = RAY_TIMEOUT_S if timeout_s is None else timeout_s
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise UsageError(f"--ray-address {address!r} is not HOST:PORT", "give e.g. --ray-address 10.0.0.1:6379")
    fix = "start it with `ray start --head` on the head host, or check the address"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as s:
            s.sendall(_H2_PREFACE)
            reply = s.recv(9)
    except socket.timeout:
        raise UsageError(f"{address} did not answer as a Ray cluster within {timeout_s:g} s (--ray-timeout)",
                         fix) from None
    except OSError as e:
        raise UsageError(f"cannot reach the Ray cluster at {address}: {e.strerror or e}", fix) from None
    if len(reply) < 9 or reply[3] != 4:          # frame type 4: SETTINGS, what any gRPC server sends first
        raise UsageError(f"{address} is open but is not a Ray cluster (no gRPC answer)", fix)


class _Deadline:
    """Raise a one-line UsageError if the block runs past ``seconds`` (SIGALRM; the main thread only)."""

    def __init__(self, seconds: float, what: str):
        self.seconds, self.what = seconds, what

    def _fire(self, signum, frame):
        raise UsageError(f"{self.what} did not finish within {self.seconds:g} s (--ray-timeout)",
                         "check the address and that the cluster runs this Ray version, or raise --ray-timeout")

    def __enter__(self):
        import signal
        import threading

        self.armed = threading.current_thread() is threading.main_thread()
        if self.armed:
            self.old = signal.signal(signal.SIGALRM, self._fire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        if self.armed:
            import signal

            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old)
        return False


class RaySession:
    """Connected to a Ray cluster for one command (reusing a connection this process already has)."""

    def __init__(self, address: str):
        self.ray = import_ray()
        check_address(address)
        self.started = False
        if not self.ray.is_initialized():
            try:
                with _Deadline(RAY_TIMEOUT_S, f"connecting to the Ray cluster at {address}"):
                    self.ray.init(address=address, include_dashboard=False, logging_level="ERROR",
                                  log_to_driver=False, configure_logging=False)
            except UsageError:
                raise
            except Exception as e:  # noqa: BLE001 - Ray raises many types; one line for the user
                raise UsageError(f"cannot connect to the Ray cluster at {address}: {e}".splitlines()[0],
                                 "check the address and that the cluster runs this Ray version") from None
            self.started = True

    def nodes(self) -> list[dict]:
        """Alive Ray nodes (raylets): {"node_id", "host", "address", "cpus"}."""
        return [{"node_id": n["NodeID"], "host": n.get("NodeManagerHostname") or n.get("NodeManagerAddress"),
                 "address": n.get("NodeManagerAddress"), "cpus": n.get("Resources", {}).get("CPU", 0)}
                for n in self.ray.nodes() if n.get("Alive")]

    def hosts(self) -> list[dict]:
        """One Ray node per machine (several raylets on one address are one host)."""
        seen, out = set(), []
        for n in self.nodes():
            if n["address"] not in seen:
                seen.add(n["address"])
                out.append(n)
        return out

    def run(self, jobs: list[tuple[str, dict]], strategy: str = "SPREAD", cpus: float = 1.0,
            die: int | None = None, ready_timeout_s: float = 60.0, pin: list[str] | None = None) -> list:
        """One actor per job, started together; results in job order. Actors go into a placement group
        (``strategy``), or each onto the Ray node of ``pin[i]`` (one job per host)."""
        ray = self.ray
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy

        pg = None if pin else placement_group([{"CPU": cpus}] * len(jobs), strategy=strategy)
        try:
            if pg is not None:
                try:
                    ray.get(pg.ready(), timeout=ready_timeout_s)
                except Exception:  # noqa: BLE001 - GetTimeoutError: not enough hosts/CPUs for the bundles
                    have = self.nodes()
                    raise UsageError(f"Ray could not place {len(jobs)} actors ({cpus:g} CPU each, {strategy}) on "
                                     f"{len(have)} Ray node(s) with {sum(h['cpus'] for h in have):g} CPUs",
                                     "use fewer nodes, --placement spread/pack, or add hosts") from None
            worker = ray.remote(num_cpus=cpus if pg is not None else 0, max_restarts=0)(_Worker)
            actors = [worker.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
                pg, placement_group_bundle_index=i) if pg is not None else
                NodeAffinitySchedulingStrategy(pin[i], soft=False)).remote() for i in range(len(jobs))]
            hosts = []
            for a in actors:
                try:
                    hosts.append(ray.get(a.host.remote(), timeout=ready_timeout_s))
                except Exception:  # noqa: BLE001 - reported per job below
                    hosts.append(None)
            start_at = time.time() + START_DELAY_S
            futures = [a.call.remote(fn, payload, start_at, die == i) for i, (a, (fn, payload)) in
                       enumerate(zip(actors, jobs))]
            out = []
            for i, f in enumerate(futures):
                try:
                    out.append(ray.get(f))
                except ray.exceptions.RayTaskError as e:      # the job raised: a failure, not a lost node
                    cause = getattr(e, "cause", None) or e
                    out.append({"status": "failed", "error": str(cause).splitlines()[0][:300], "host": hosts[i]})
                except ray.exceptions.RayError as e:          # actor, worker or host died
                    out.append(Lost(i, f"Ray actor died: {str(e).splitlines()[0][:200]}", hosts[i]))
            for a in actors:
                try:
                    ray.kill(a)
                except Exception:  # noqa: BLE001 - already dead
                    pass
            return out
        finally:
            if pg is not None:
                remove_placement_group(pg)

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()


class _Worker:
    """The Ray actor: where it runs, and a job run there."""

    def host(self) -> str:
        return socket.gethostname()

    def call(self, fn: str, payload: dict, start_at: float, die: bool) -> dict:
        return call(fn, payload, start_at, die)


def run_jobs(jobs: list[tuple[str, dict]], ray_address: str | None = None, strategy: str = "SPREAD",
             die: int | None = None) -> list:
    """Run ``jobs`` locally (one process each) or on Ray (one actor each)."""
    if not ray_address:
        return run_local(jobs, die)
    session = RaySession(ray_address)
    try:
        return session.run(jobs, strategy=strategy, die=die)
    finally:
        session.close()
