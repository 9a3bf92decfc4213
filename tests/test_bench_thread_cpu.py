"""bench/thread_cpu.py: each thread's CPU read from /proc, names with their digits folded, a command
run to its end."""
import os
import threading
import time

from bench import thread_cpu


def test_a_busy_thread_shows_its_cpu_and_names_fold_their_digits():
    stop, started = threading.Event(), threading.Event()
    got = {}

    def spin():
        got["tid"] = threading.get_native_id()
        started.set()
        while not stop.is_set():
            pass
    th = threading.Thread(target=spin)
    th.start()
    started.wait()
    time.sleep(0.4)
    mine = thread_cpu.threads_of(os.getpid())
    stop.set()
    th.join()
    assert os.getpid() in mine and mine[got["tid"]][1] >= 0.1   # the spinning thread, seen with its CPU
    seen = {(1, 1): ("Executor task launch worker-3", 1.5), (1, 2): ("Executor task launch worker-17", 0.5),
            (2, 3): ("Thread-4", 0.25)}
    assert thread_cpu.by_name(seen) == {"Executor task launch worker-N": 2.0, "Thread-N": 0.25}
    assert thread_cpu.threads_of(2**22 + 12345) == {}


def test_the_command_runs_to_its_end_and_its_exit_is_given(capsys):
    assert thread_cpu.main(["--process", "^sleep$", "--slot-ms", "10", "--", "sleep", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "sleep 0.2: exit 0" in out
    assert thread_cpu.main(["--process", "^false$", "--", "false"]) == 1
