"""Opens poslab's report and attention explorer in a real browser (Debian's chromium, headless,
driven by selenium through chromium-driver) from file:// and checks what a reader would see.

    /usr/bin/python3 tests/browser/check_pages.py --report DIR/index.html --summary SUMMARY.csv \
        [--explorer DIR/index.html] [--hostile-report DIR/index.html] [--hostile-explorer ...] \
        --screenshots DIR

Checks, per page (each failure is printed; exit code 1 if any):
  - no message of level SEVERE in the browser console (script errors, blocked loads);
  - every chart rendered: each Vega view's SVG (or canvas) has marks in it;
  - report: each run's loss in the run table equals its main row of summary.csv (and its text
    is that number rounded); sorting by loss orders the rows; the filter hides rows; for a
    partly run study (--partial-report), its runs show as done or pending as they are;
  - explorer: a click on another head changes the attention map, the length slider changes it,
    and both runs' maps follow the one shared control; --rope-explorer (a RoPE run and its YaRN
    twin): each column says what differs, RoPE's q.k response is one curve ("every head");
  - escaping (hostile pages, made with a study and run named <script>alert(1)</script> and
    "><img src=x onerror=...>): no alert opened, no <img> or <script> element came from the
    data, and the names show as text.
--study-report INDEX SUMMARY (repeatable) checks a committed study's report as --report.
A screenshot of each page is written to --screenshots (report.png, explorer.png, ...).
"""
import argparse
import csv
import math
import os
import sys
import tempfile
import time

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

FAILURES = []


def check(condition, message):
    print(("ok    " if condition else "FAIL  ") + message)
    if not condition:
        FAILURES.append(message)
    return condition


def browser(profile):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                 "--window-size=1400,1800"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def console_errors(driver):
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def no_alert(driver):
    try:
        text = driver.switch_to.alert.text
        driver.switch_to.alert.dismiss()
        return text
    except NoAlertPresentException:
        return None


def wait_for(driver, script, what, timeout=60):
    try:
        WebDriverWait(driver, timeout, poll_frequency=0.2).until(lambda d: d.execute_script(script))
        return True
    except TimeoutException:
        return check(False, f"timed out waiting for {what}")


def open_page(driver, index):
    driver.get("file://" + os.path.abspath(index))


CHART_MARKS = """
// Number of charts, and of charts whose SVG holds marks (paths, symbols, rects) or whose canvas
// has been drawn on.
const charts = [...document.querySelectorAll('.vega-embed')];
let drawn = 0;
for (const c of charts) {
  const svg = c.querySelector('svg');
  if (svg && svg.querySelectorAll('g.mark-line path, g.mark-symbol path, g.mark-rect path, g.mark-area path, g.mark-rule line, g.mark-symbol, g.mark-rect').length > 0) { drawn++; continue; }
  const canvas = c.querySelector('canvas');
  if (canvas && canvas.width > 0) drawn++;
}
return [charts.length, drawn];
"""


def check_charts(driver, page, expected_min):
    wait_for(driver, f"const c = document.querySelectorAll('.vega-embed').length; "
                     f"return c >= {expected_min} && [...document.querySelectorAll('.vega-embed')]"
                     f".every(e => e.querySelector('svg, canvas'));", f"{page}: charts")
    total, drawn = driver.execute_script(CHART_MARKS)
    check(total >= expected_min and drawn == total,
          f"{page}: every chart rendered ({drawn} of {total} have marks, expected >= "
          f"{expected_min} charts)")


def summary_losses(path):
    """{run id: loss of its main evaluation row} from summary.csv."""
    losses = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["kind"] == "main" and row["run"] not in losses:
                losses[row["run"]] = float(row["loss"]) if row["loss"] else None
    return losses


def check_statuses(driver, losses, name):
    """A partly run study: the runs of summary.csv show as done, every other planned run as
    pending, and the status filter keeps exactly the pending ones."""
    statuses = driver.execute_script("""return [...document.querySelectorAll('#run-table tbody tr')]
        .map(tr => [tr.dataset.run, tr.querySelector('td.status-done, td.status-pending, '
        + 'td.status-running, td.status-incomplete, td.status-stale').textContent]);""")
    wrong = [(run, status) for run, status in statuses
             if status != ("done" if run in losses else "pending")]
    check(not wrong and len(statuses) > len(losses),
          f"{name}: {len(losses)} runs done, {len(statuses) - len(losses)} pending ({wrong[:3]})")
    driver.execute_script("const s = document.getElementById('status-filter'); s.value = 'pending';"
                          "s.dispatchEvent(new Event('change'))")
    shown = driver.execute_script("return document.querySelectorAll('#run-table tbody tr').length")
    check(shown == len(statuses) - len(losses), f"{name}: the status filter shows the {shown} "
                                                f"pending runs")


def check_report(driver, index, summary, screenshots, name="report", partial=False):
    open_page(driver, index)
    wait_for(driver, "return document.querySelectorAll('#run-table tbody tr').length > 0",
             f"{name}: run table")
    expected = driver.execute_script(
        "return window.POSLAB_REPORT.figures.reduce((n, f) => n + f.panels.length, 0)")
    check(expected > 0, f"{name}: the study has figures ({expected} panels)")
    check_charts(driver, name, expected)
    losses = summary_losses(summary)
    cells = driver.execute_script("""
        return [...document.querySelectorAll('#run-table tbody tr')].map(tr => [tr.dataset.run,
          tr.querySelector('td[data-key=loss]').dataset.value || null,
          tr.querySelector('td[data-key=loss]').textContent]);""")
    matched = 0
    for run, value, text in cells:
        if run not in losses:
            continue
        want = losses[run]
        got = float(value) if value is not None else None
        same = (want is None and got is None) or (want is not None and got is not None and
                                                  math.isclose(got, want, rel_tol=0, abs_tol=1e-12)
                                                  and text == f"{want:.4f}")
        matched += check(same, f"{name}: run {run!r}: table loss {text!r} ({value}) = "
                               f"summary.csv {want!r}") and 1
    check(matched == len(losses) and matched > 0,
          f"{name}: every run of summary.csv is in the table ({matched} of {len(losses)})")
    if partial:
        check_statuses(driver, losses, name)
        driver.save_screenshot(os.path.join(screenshots, f"{name}.png"))
        errors = console_errors(driver)
        check(not errors, f"{name}: no console errors {errors[:3]}")
        return
    # Sorting by loss orders the rows; the filter hides the others.
    header = driver.find_element(By.CSS_SELECTOR, "#run-table th[data-key=loss]")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", header)
    driver.execute_script("arguments[0].click()", header)
    values = driver.execute_script("""return [...document.querySelectorAll(
        '#run-table tbody td[data-key=loss]')].map(td => td.dataset.value ? +td.dataset.value : null)
        .filter(v => v !== null);""")
    check(values == sorted(values), f"{name}: a click on the loss column sorts the runs")
    box = driver.find_element(By.ID, "run-filter")
    ids = [run for run, _, _ in cells]
    first = min(ids, key=lambda r: sum(r in other for other in ids))  # no prefix of another
    box.send_keys(first)
    shown = driver.execute_script("return [...document.querySelectorAll('#run-table tbody tr')]"
                                  ".map(tr => tr.dataset.run)")
    check(first in shown and (len(shown) < len(cells) or len(cells) == 1),
          f"{name}: filtering on {first!r} keeps {len(shown)} of {len(cells)} rows")
    box.clear()
    driver.execute_script("document.getElementById('run-filter').dispatchEvent(new Event('input'))")
    driver.execute_script("window.scrollTo(0, 0)")
    time.sleep(0.5)
    driver.save_screenshot(os.path.join(screenshots, f"{name}.png"))
    driver.execute_script("document.getElementById('figures').scrollIntoView()")
    time.sleep(0.3)
    driver.save_screenshot(os.path.join(screenshots, f"{name}_figures.png"))
    errors = console_errors(driver)
    check(not errors, f"{name}: no console errors {errors[:3]}")


def check_explorer(driver, index, screenshots, name="explorer"):
    open_page(driver, index)
    wait_for(driver, "return window.poslabExplorer && window.poslabExplorer.ready()",
             f"{name}: the first maps")
    check_charts(driver, name, 4)
    signature = ("return window.poslabExplorer.mapSignatures()")  # one string per run's map
    before = driver.execute_script(signature)
    check(len(before) >= 1 and all(before), f"{name}: attention maps drawn ({len(before)} runs)")
    heads = driver.find_elements(By.CSS_SELECTOR, ".heads button")
    check(len(heads) >= 2, f"{name}: head buttons ({len(heads)})")
    if len(heads) >= 2:
        heads[1].click()
        wait_for(driver, "return window.poslabExplorer.ready()", f"{name}: map after a head click")
        after_head = driver.execute_script(signature)
        check(all(a != b for a, b in zip(before, after_head)),
              f"{name}: a click on another head changes every run's attention map")
        before = after_head
    slider = driver.find_element(By.ID, "length")
    driver.execute_script("arguments[0].value = arguments[0].max; "
                          "arguments[0].dispatchEvent(new Event('input'))", slider)
    wait_for(driver, "return window.poslabExplorer.ready()", f"{name}: map after the slider")
    after_length = driver.execute_script(signature)
    check(all(a != b for a, b in zip(before, after_length)),
          f"{name}: the length slider changes every run's attention map")
    check_charts(driver, name, 4)
    driver.execute_script("arguments[0].value = 1; arguments[0].dispatchEvent(new Event('input'))",
                          slider)
    wait_for(driver, "return window.poslabExplorer.ready()", f"{name}: map at 2x")
    time.sleep(0.5)
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(os.path.join(screenshots, f"{name}.png"))
    errors = console_errors(driver)
    check(not errors, f"{name}: no console errors {errors[:3]}")


def check_rope_explorer(driver, index, screenshots):
    """Two RoPE runs that differ only in their scaling (none; YaRN at s = 4): each column says
    what sets it apart (not only "(rope)"; only settings its own scaling reads), and the positional panel, RoPE's q.k response (the
    same for every head), is one curve, not four head colours over one line (issue 33)."""
    name = "rope explorer"
    open_page(driver, index)
    wait_for(driver, "return window.poslabExplorer && window.poslabExplorer.ready()",
             f"{name}: the first maps")
    differs = driver.execute_script(
        "return [...document.querySelectorAll('.run-column')].map(c => "
        "(c.querySelector('.differs') || {}).textContent || '')")
    # Only settings that the run's own scaling reads (issue 51): the factor sets YaRN's run
    # apart, and means nothing to the run without scaling.
    check(len(differs) == 2 and all("encoding.scaling" in d for d in differs)
          and "encoding.factor" in differs[1] and "encoding.factor" not in differs[0],
          f"{name}: each run's header says what differs, in settings its scaling reads {differs}")
    check(len(differs) == 2 and '"yarn"' in differs[1] and '"none"' in differs[0],
          f"{name}: and with which values")
    curves = driver.execute_script("return window.poslabExplorer.positionalCurves()")
    check(curves == [["every head"], ["every head"]],
          f"{name}: the q.k response is one curve per run, 'every head' ({curves})")
    driver.save_screenshot(os.path.join(screenshots, "rope_explorer.png"))
    errors = console_errors(driver)
    check(not errors, f"{name}: no console errors {errors[:3]}")


HOSTILE = ["<script>alert(1)</script>", '"><img src=x onerror=alert(2)>']


def check_escaping(driver, index, page):
    open_page(driver, index)
    time.sleep(3)
    alert = no_alert(driver)
    check(alert is None, f"{page}: no alert opened (got {alert!r})")
    images = driver.execute_script("return document.querySelectorAll('img').length")
    check(images == 0, f"{page}: no <img> element in the page ({images})")
    scripts = driver.execute_script(
        "return [...document.querySelectorAll('script')].filter(s => !s.src).length")
    check(scripts == 0, f"{page}: no inline <script> element ({scripts})")
    text = driver.execute_script("return document.body.innerText")
    for hostile in HOSTILE:
        check(hostile in text, f"{page}: {hostile!r} shows as text")
    errors = console_errors(driver)
    check(not errors, f"{page}: no console errors {errors[:3]}")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--report")
    parser.add_argument("--summary")
    parser.add_argument("--partial-report", help="a report of a partly run study")
    parser.add_argument("--partial-summary")
    parser.add_argument("--explorer")
    parser.add_argument("--rope-explorer", help="the explorer of a RoPE run and its YaRN twin")
    parser.add_argument("--hostile-report")
    parser.add_argument("--hostile-explorer")
    parser.add_argument("--study-report", nargs=2, action="append", default=[],
                        metavar=("INDEX", "SUMMARY"),
                        help="a committed study's report and its summary.csv (repeatable): "
                             "checked as --report; its figures are the study's own kinds "
                             "(two-stage, randomized, passkey heatmaps)")
    parser.add_argument("--screenshots", required=True)
    args = parser.parse_args(argv[1:])
    os.makedirs(args.screenshots, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="poslab-chromium-") as profile:
        driver = browser(profile)
        try:
            if args.report:
                check_report(driver, args.report, args.summary, args.screenshots)
            for index, summary in args.study_report:
                name = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(index))))
                check_report(driver, index, summary, args.screenshots, f"report_{name}")
            if args.partial_report:
                check_report(driver, args.partial_report, args.partial_summary,
                             args.screenshots, "partial_report", partial=True)
            if args.explorer:
                check_explorer(driver, args.explorer, args.screenshots)
            if args.rope_explorer:
                check_rope_explorer(driver, args.rope_explorer, args.screenshots)
            if args.hostile_report:
                check_escaping(driver, args.hostile_report, "hostile report")
                driver.save_screenshot(os.path.join(args.screenshots, "hostile_report.png"))
            if args.hostile_explorer:
                check_escaping(driver, args.hostile_explorer, "hostile explorer")
                driver.save_screenshot(os.path.join(args.screenshots, "hostile_explorer.png"))
        finally:
            driver.quit()
    print(f"{len(FAILURES)} failure(s)" if FAILURES else "all browser checks passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
