#!/usr/bin/env python3
"""Writes the sample trace (the original failure), replays it with every output, and
checks them: exit status 1 (it overflows); the SVG is well-formed XML with the verdict
in its title, the lines, the tag legend and overflow points; the Chrome trace is Trace
Event JSON with the counter track and overflow instants; the JSON report has the verdict.

usage: check_trace_outputs.py TRACE_SAMPLE ZARENA_REPLAY OUT_PREFIX
"""
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

sample, replay, out = sys.argv[1:4]
trace = out + ".zat"
svg_path, chrome_path, report_path = out + ".svg", out + ".chrome.json", out + ".report.json"
subprocess.run([sample, trace, "never_reset"], check=True)
r = subprocess.run([replay, trace, "--svg", svg_path, "--chrome-trace", chrome_path,
                    "--json", report_path], capture_output=True, text=True)
print(r.stdout)
assert r.returncode == 1, f"exit {r.returncode}, expected 1 (would overflow): {r.stderr}"
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(svg_path).getroot()  # raises on malformed XML
assert root.tag == ns + "svg", root.tag
texts = ["".join(t.itertext()) for t in root.iter(ns + "text")]
assert any("never_reset" in t for t in texts), texts[:3]
assert any("weights" in t for t in texts), "tag legend missing"
assert len(list(root.iter(ns + "path"))) >= 3, "lines missing"
assert len(list(root.iter(ns + "circle"))) >= 1, "overflow points missing"

events = json.load(open(chrome_path))["traceEvents"]
counters = [e for e in events if e["ph"] == "C"]
assert counters and all({"top", "live"} <= set(e["args"]) for e in counters)
assert all(a["ts"] <= b["ts"] for a, b in zip(counters, counters[1:])), "time goes back"
assert any(e["ph"] == "i" and e["name"] == "overflow" for e in events)

report = json.load(open(report_path))
assert report["verdict"] == "never_reset", report["verdict"]
assert report["exit_code"] == 1
print("svg, chrome trace and report are well-formed")
