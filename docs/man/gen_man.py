#!/usr/bin/env python3
"""gen_man.py SCDOC IN.scd OUT KNOBS.md DOCDIR [wheel]: OUT = scdoc's rendering of IN.scd,
where a line '@KNOBS@' becomes the knob table of KNOBS.md, docs/knobs.md (between <!-- knobs:begin --> and
<!-- knobs:end -->, which tests/unit/test_config keeps identical to src/config/config_knobs.c's table),
'@DOCDIR@' the folder the documentation is installed to, and '@DOCDIR_WHERE@' nothing, or
with `wheel` (DOCDIR then relative) where that folder lies."""
import subprocess
import sys

# A wheel's data files land under the prefix of the environment pip installs into.
WHEEL_WHERE = (" (under the prefix pip installed gpupool into: the virtual environment,"
               " /usr/local for a system-wide pip, ~/.local with pip install --user)")


def scd(text):
    """Markdown cell text as scdoc text: code spans plain, scdoc's markup characters escaped."""
    return text.replace("`", "").replace("\\", "\\\\").replace("*", "\\*").replace("_", "\\_")


def knobs(knobs_md, docdir):
    with open(knobs_md) as f:
        md = f.read()
    rows = md.split("<!-- knobs:begin -->", 1)[1].split("<!-- knobs:end -->", 1)[0].strip().splitlines()[2:]
    out = []
    for row in rows:
        name, default, rng, effect = [c.strip() for c in row.strip().strip("|").split(" | ")]
        effect = effect.replace("docs/", docdir.rstrip("/") + "/")  # where the docs are installed
        out += ["*%s* (default %s)" % (scd(name), scd(default)), "\t%s" % scd(effect),
                "", "\tValues: %s" % scd(rng), ""]
    return "\n".join(out)


def main():
    if len(sys.argv) not in (6, 7) or sys.argv[6:] not in ([], ["wheel"]):
        print("usage: gen_man.py SCDOC IN.scd OUT KNOBS.md DOCDIR [wheel]", file=sys.stderr)
        return 2
    scdoc, src, out, knobs_md, docdir = sys.argv[1:6]
    with open(src) as f:
        text = f.read()
    if "@KNOBS@" in text:
        text = text.replace("@KNOBS@", knobs(knobs_md, docdir))
    text = text.replace("@DOCDIR_WHERE@", scd(WHEEL_WHERE) if sys.argv[6:] else "")
    text = text.replace("@DOCDIR@", scd(docdir))
    with open(out, "wb") as f:
        subprocess.run([scdoc], input=text.encode(), stdout=f, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
