"""Rendering an audit report in a real headless Chromium: the DOM after its scripts ran, computed
styles read by a probe script the test appends to a copy of the page, and a screenshot."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
WIDTH = 1280

# Appended to a copy of the report: after the page's own scripts, writes what a person sees (colours,
# the page's width) into the DOM, which --dump-dom then prints.
PROBE = """<script>
(function () {
  function css(sel) {
    var e = document.querySelector(sel); if (!e) { return null; }
    var s = getComputedStyle(e);
    return {background: s.backgroundColor, color: s.color, text: e.textContent.trim()};
  }
  var out = {verdict: css("#verdict"), problems: [], statuses: [], scrollWidth: document.documentElement.scrollWidth,
             innerWidth: window.innerWidth, lastCopy: css(".last-copy")};
  document.querySelectorAll("li.problem").forEach(function (li) {
    out.problems.push({text: li.textContent, color: getComputedStyle(li).color});
  });
  document.querySelectorAll(".status").forEach(function (e) {
    out.statuses.push({text: e.textContent, background: getComputedStyle(e).backgroundColor});
  });
  var pre = document.createElement("pre"); pre.id = "bkdisk-probe"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "chromium is not installed (./dev test installs Debian's chromium package)"
    return found


def render(page: Path, work: Path, screenshot: Path | None = None) -> tuple[str, dict]:
    """(the DOM after scripts ran, the probe's findings) for ``page`` at WIDTH px; a screenshot when asked."""
    work.mkdir(parents=True, exist_ok=True)
    probed = work / f"{page.stem}-probed.html"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    flags = [*CHROMIUM_FLAGS, f"--window-size={WIDTH},1000"]
    profile = work / "profile-dom"
    p = subprocess.run([chromium(), *flags, f"--user-data-dir={profile}", "--dump-dom", probed.as_uri()],
                       capture_output=True, text=True, check=False, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    m = re.search(r'<pre id="bkdisk-probe">(.*?)</pre>', p.stdout, re.S)
    assert m, "the probe did not run: " + p.stdout[-2000:]
    text = m.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
    probe = json.loads(text)
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        s = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--window-size={WIDTH},2400",
                            f"--user-data-dir={work / 'profile-shot'}", f"--screenshot={screenshot}", page.as_uri()],
                           capture_output=True, text=True, check=False, timeout=120)
        assert s.returncode == 0 and screenshot.is_file(), s.stderr[-2000:]
    return p.stdout, probe


def rgb(text: str) -> tuple[int, int, int]:
    r, g, b = (int(x) for x in re.findall(r"\d+", text)[:3])
    return r, g, b


def reddish(c: str) -> bool:
    r, g, b = rgb(c)
    return r > 150 and g < 90 and b < 90


def greenish(c: str) -> bool:
    r, g, b = rgb(c)
    return g > 100 and r < 80 and b < 100
