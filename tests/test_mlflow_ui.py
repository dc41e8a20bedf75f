"""The MLflow UI on the session's smoke run, in a real headless browser.

`mlflow server` runs on loopback against the smoke run's store (tests/conftest.py::smoke_run: no
second training), Debian's chromium opens it headless through chromedriver and selenium, and the
test reads what the pages show: the experiment and the run in the runs list, the run's
"_overview" charts first and a metric curve of the run on the page the run summary names
(`cudal1.pipeline.report.run_page`, MLflow's "Model training" view; the experiment's bare address
opens the GenAI view), the rollouts table artifact with its
columns and rows, and the registered model `cudal1-policy` with the run's versions. Nothing is saved (no screenshots).

The browser comes from the system: `apt-get install -y chromium chromium-driver`
(scripts/install.sh installs both as root). Without them, or without selenium (the `test` extra),
the test fails and says so: it does not skip.

Run alone on 2026-12-02 (2-core machine): 83 s at low load (setup 58 s: the session's cluster,
the smoke run and the server; the pages 22 s), 6 min at load average ~20; in the suite the smoke
run is shared with tests/pipeline/test_topology.py.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from cudal1.pipeline.metrics import overview_key
from tests.procs import stop_process_group

pytestmark = pytest.mark.slow  # the smoke run (shared), an MLflow server and a browser: ~1-3 min
PAGE_TIMEOUT_S = 120.0  # a page of the single-page app can take long to render on a busy 2-core machine


def browser_paths() -> tuple[str, str]:
    """(chromium, chromedriver) from PATH. Fails the test, naming the fix, when either is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.fail(
            "the MLflow UI test needs Debian's chromium and chromedriver on PATH (found chromium="
            f"{chromium}, chromedriver={driver}): apt-get install -y chromium chromium-driver, "
            "or run scripts/install.sh as root",
            pytrace=False,
        )
    return chromium, driver


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mlflow_server(smoke_run, tmp_path_factory):
    """Base URL of `mlflow server` on loopback over the smoke run's store; stopped afterwards."""
    port = _free_port()
    log = tmp_path_factory.mktemp("mlflow-ui") / "server.log"
    # The server's working directory is a scratch folder: it creates the Default experiment's
    # ./mlruns there.
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        smoke_run.tracking_uri,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=log.parent, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            assert proc.poll() is None, f"mlflow server exited ({proc.returncode}):\n{log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"mlflow server not up after 240 s:\n{log.read_text()[-3000:]}"
            time.sleep(1)
        yield url
    finally:
        stop_process_group(proc)


@pytest.fixture(scope="session")  # session: set up before the session's smoke run, so a missing browser fails at once
def browser():
    """A headless chromium driven by selenium through Debian's chromedriver (no download)."""
    chromium, driver_path = browser_paths()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:
        pytest.fail(f"the MLflow UI test needs selenium (the test extra: pip install -e '.[test]'): {e}", pytrace=False)
    options = Options()
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1600,1200",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(PAGE_TIMEOUT_S)
    try:
        yield driver
    finally:
        driver.quit()


class Page:
    """What the browser shows: the page's visible text, waited for."""

    def __init__(self, driver) -> None:
        self.driver = driver

    def text(self) -> str:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.TAG_NAME, "body").text

    def open(self, url: str, *expected: str) -> str:
        """Load `url` and wait until the page shows every string of `expected`; returns its text."""
        self.driver.get(url)
        return self.wait_for(*expected)

    def wait_for(self, *expected: str, timeout_s: float = PAGE_TIMEOUT_S) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.text()
            missing = [e for e in expected if e not in text]
            if not missing:
                return text
            if time.monotonic() > deadline:
                pytest.fail(
                    f"{self.driver.current_url} does not show {missing} after {timeout_s:.0f} s; "
                    f"it shows:\n{text[:3000]}"
                )
            time.sleep(0.5)

    def click(self, label: str) -> None:
        """Click the visible element whose own text is `label` (waits for it)."""
        from selenium.webdriver.common.by import By

        xpath = f"//*[normalize-space(text())='{label}']"
        deadline = time.monotonic() + PAGE_TIMEOUT_S
        while True:
            shown = [e for e in self.driver.find_elements(By.XPATH, xpath) if e.is_displayed()]
            if shown:
                self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", shown[0])
                shown[0].click()
                return
            if time.monotonic() > deadline:
                pytest.fail(f"no visible {label!r} on {self.driver.current_url}:\n{self.text()[:3000]}")
            time.sleep(0.5)

    def scroll_to(self, label: str) -> None:
        from selenium.webdriver.common.by import By

        for e in self.driver.find_elements(By.XPATH, f"//*[normalize-space(text())='{label}']"):
            self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", e)


def test_mlflow_ui_shows_the_smoke_runs_curves_tables_and_registered_model(browser, smoke_run, mlflow_server):
    # The browser first: without one the test fails at once, before the smoke run trains.
    from mlflow import MlflowClient

    from cudal1.pipeline.report import MODEL_TRAINING_VIEW, run_page

    client = MlflowClient(smoke_run.tracking_uri)
    experiment = client.get_experiment_by_name(smoke_run.cfg.tracking.experiment)
    run_id, run_name = smoke_run.state.mlflow_run_id, smoke_run.run_dir.name
    versions = sorted(smoke_run.state.registered.values(), key=int)
    assert run_id and len(versions) == 3  # one per stage, registered by the run itself
    page = Page(browser)
    base = f"{mlflow_server}/#/experiments/{experiment.experiment_id}"

    # MLflow 3.17 opens an experiment in its GenAI view (traces, sessions, judges) unless told
    # otherwise (the browser is fresh: no earlier choice in its local storage) ...
    # (its sidebar names judges and traces; the URL carries no workflowType then).
    page.open(base, "Judges", "Traces")
    # ... and with MODEL_TRAINING_VIEW in its "Model training" view, whose experiment page is the
    # runs list: the experiment and the run by its name. (Its "Models" column stayed "-" for this
    # run in one try and named the model in another: not asserted; the model's page is below.)
    page.open(f"{base}?{MODEL_TRAINING_VIEW}", smoke_run.cfg.tracking.experiment, run_name, "1 matching run")
    assert f"/runs?{MODEL_TRAINING_VIEW}" in browser.current_url, browser.current_url

    # The run's page that the run summary prints: its metric curves, a chart per metric, titled
    # "<run> (<metric>)"; the charts of a section are drawn when it scrolls into view. The
    # "_overview" section comes first, its charts drawn without scrolling; the sidebar is the
    # Model training view's (the model registry, no judges).
    text = page.open(run_page(mlflow_server, experiment.experiment_id, run_id), "rl/reward", "_overview", "learner")
    page.wait_for("bench", "Model registry")
    text = page.text()
    assert "Judges" not in text, text[:2000]
    assert text.index("_overview") < min(text.index(s) for s in ("bench", "learner", "rl/reward")), text[:2000]
    first, stage = f"{run_name} ({overview_key('reward')})", f"{run_name} ({overview_key('stage')})"
    page.wait_for(first, stage)
    text = page.text()  # in the reading order (`OVERVIEW_ORDER`), not alphabetical
    assert text.index(first) < text.index(f"{run_name} ({overview_key('pass_rate')})") < text.index(stage), text[:3000]
    for _ in range(20):
        page.scroll_to("rl/reward")
        if f"{run_name} (rl/reward/mean)" in page.text():
            break
        time.sleep(0.5)
    page.wait_for(f"{run_name} (rl/reward/mean)", "Step")

    # The rollouts table artifact, as a table: its columns and one row per rollout.
    page.open(f"{base}/runs/{run_id}/artifacts", "tables", "rollouts")
    page.click("tables")
    page.click("rollouts.json")
    text = page.wait_for("tables/rollouts.json", "task_id", "reward", "status", "reward_reason")
    for task in smoke_run.cfg.tasks.ids:
        assert task in text
    assert "contrastive_rl" in text and "self_train" in text  # rows of both sampling stages

    # The registered model with the run's versions and their stage tags.
    text = page.open(f"{mlflow_server}/#/models/cudal1-policy", "cudal1-policy", *(f"Version {v}" for v in versions))
    for stage in ("sft", "self_train", "contrastive_rl"):
        assert stage in text
    assert f"Version {int(versions[-1]) + 1}" not in text  # this store holds this run's versions only
