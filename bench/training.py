"""Training lab cost: the default run, the worst run the caps allow, and other pages while one trains.

    python -m bench.training            # ~1-2 minutes on 2 cores
    python -m bench.training --quick    # fewer reruns, and the worst run cut to a fifth of its steps

Torch runs on one intra-op thread, as in the app (streamlit_app.py). The rerun latency of the
reference page (loadtest/reference_page.py) and of a lesson page is measured idle and again while
another thread trains the two-layer induction run (as another student's session would), all in
the same run, so the ratios cancel the machine's speed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import threading
import time
from dataclasses import replace

import torch
from streamlit.testing.v1 import AppTest

from core.app import registry
from core.lessons import training_lab as tt
from core.models import tiny_transformer as model_tt
from testkit.harness import ROOT, percentile, use_navigation_mode

DEFAULT = model_tt.TrainingConfig()
INDUCTION = tt.default_config(model_tt.Task.INDUCTION)  # the page's induction defaults
OTHER_PAGE = registry.page("multi_head").file


def worst_allowed() -> model_tt.TrainingConfig:
    """The run with the largest estimated time among every choice the page offers, after the caps."""
    choices = itertools.product(model_tt.Task, (1, 2), range(1, model_tt.MAX_HEADS + 1), model_tt.D_K_CHOICES)
    configs = [
        tt.within_caps(model_tt.TrainingConfig(task=t, layers=n, heads=h, d_k=d, steps=tt.MAX_STEPS)).config
        for t, n, h, d in choices
    ]
    return max(configs, key=tt.estimated_seconds)


def time_run(config: model_tt.TrainingConfig) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this thread): on a shared machine the second is what one core spent."""
    started, cpu_started = time.perf_counter(), time.thread_time()
    model_tt.train(config)
    return time.perf_counter() - started, time.thread_time() - cpu_started


def reruns(at: AppTest, change, repeats: int, first: int = 0) -> list[float]:
    """Rerun times after `change(at, i)` for i = first, first + 1, ... (new values: no cache hits)."""
    times = []
    for i in range(first, first + repeats):
        change(at, i)
        started = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - started)
        assert not at.exception, [e.value for e in at.exception]
    return times


def reference_app() -> tuple[AppTest, object]:
    at = AppTest.from_file(str(ROOT / "loadtest" / "reference_page.py"), default_timeout=120)
    at.run()
    return at, lambda a, i: a.slider(key="value").set_value(i % 100)


def lesson_app() -> tuple[AppTest, object]:
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=120)
    at.run()
    at.switch_page(OTHER_PAGE).run()
    return at, lambda a, i: a.sidebar.number_input(key="seed").set_value(2000 + i)


def reruns_while_training(apps: dict, repeats: int, first: int) -> dict[str, list[float]]:
    """Rerun times of each app while another thread trains the induction run over and over
    (at normal priority, as a student's training runs in the app)."""
    done = threading.Event()

    def train_in_background() -> None:
        while not done.is_set():  # keep a training going for the whole measurement
            model_tt.train(INDUCTION)

    trainer = threading.Thread(target=train_in_background, daemon=True)
    trainer.start()
    time.sleep(1.0)  # past the run's set-up
    busy = {name: reruns(at, change, repeats, first=first) for name, (at, change) in apps.items()}
    done.set()
    trainer.join()
    return busy


def latency_while_training(repeats: int) -> dict:
    """Median and p95 rerun of the reference page and a lesson page: idle, and while another
    session's training runs in the same process."""
    apps = {"reference": reference_app(), "multi_head": lesson_app()}
    idle = {name: reruns(at, change, repeats) for name, (at, change) in apps.items()}
    busy = reruns_while_training(apps, repeats, first=repeats)
    reference_idle = statistics.median(idle["reference"])
    result = {}
    for name in apps:
        result[name] = {
            "idle_median_s": statistics.median(idle[name]),
            "idle_p95_s": percentile(idle[name], 0.95),
            "training_median_s": statistics.median(busy[name]),
            "training_p95_s": percentile(busy[name], 0.95),
            "idle_ratio": statistics.median(idle[name]) / reference_idle,
            "training_ratio": statistics.median(busy[name]) / reference_idle,
            "slowdown": statistics.median(busy[name]) / statistics.median(idle[name]),
        }
    return result


def run(quick: bool = False) -> dict:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        use_navigation_mode()
        time_run(model_tt.TrainingConfig(steps=20))  # warm-up: torch's first calls set up kernels
        worst = worst_allowed()
        timed_worst = replace(worst, steps=max(1, worst.steps // 5)) if quick else worst
        default_times = [time_run(DEFAULT) for _ in range(3)]
        induction_wall, induction_cpu = time_run(INDUCTION)
        worst_wall, worst_cpu = (t * (worst.steps / timed_worst.steps) for t in time_run(timed_worst))
        return {
            "load_average_1min": os.getloadavg()[0],  # other work on the machine inflates the wall times
            "default_run_s": statistics.median(t for t, _ in default_times),
            "default_run_cpu_s": statistics.median(c for _, c in default_times),
            "induction_run_s": induction_wall,
            "induction_run_cpu_s": induction_cpu,
            "worst_config": f"{tt.run_label(worst)} · {worst.steps} steps",
            "worst_estimated_s": tt.estimated_seconds(worst),
            "worst_run_s": worst_wall,
            "worst_run_cpu_s": worst_cpu,
            "worst_run_extrapolated": quick,
            "latency": latency_while_training(5 if quick else 15),
        }
    finally:
        torch.set_num_threads(threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    print(json.dumps(run(parser.parse_args().quick), indent=2))


if __name__ == "__main__":
    main()
