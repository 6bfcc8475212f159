#!/usr/bin/env python3
"""gen_man.py SCDOC IN.scd OUT [README.md]: OUT = scdoc's rendering of IN.scd, where a line
'@KNOBS@' becomes the knob table of README.md (between <!-- knobs:begin --> and
<!-- knobs:end -->, which tests/unit/test_config keeps identical to src/config.c's table)."""
import subprocess
import sys


def scd(text):
    """Markdown cell text as scdoc text: code spans plain, scdoc's markup characters escaped."""
    return text.replace("`", "").replace("\\", "\\\\").replace("*", "\\*").replace("_", "\\_")


def knobs(readme):
    with open(readme) as f:
        md = f.read()
    rows = md.split("<!-- knobs:begin -->", 1)[1].split("<!-- knobs:end -->", 1)[0].strip().splitlines()[2:]
    out = []
    for row in rows:
        name, default, rng, effect = [c.strip() for c in row.strip().strip("|").split(" | ")]
        out += ["*%s* (default %s)" % (scd(name), scd(default)), "\t%s" % scd(effect),
                "", "\tValues: %s" % scd(rng), ""]
    return "\n".join(out)


def main():
    scdoc, src, out = sys.argv[1:4]
    with open(src) as f:
        text = f.read()
    if "@KNOBS@" in text:
        text = text.replace("@KNOBS@", knobs(sys.argv[4]))
    with open(out, "wb") as f:
        subprocess.run([scdoc], input=text.encode(), stdout=f, check=True)


if __name__ == "__main__":
    main()
