#!/usr/bin/python3
"""Prints, for each numcodecs configuration read from stdin (a JSON list),
what numcodecs itself writes for that codec (get_config), or the error
making it: the form v2 readers expect in a .zarray.

Usage: /usr/bin/python3 numcodecs_configs.py < CONFIGS.json
"""
import json
import sys

import numcodecs

out = []
for cfg in json.load(sys.stdin):
    try:
        out.append({"config": numcodecs.get_codec(dict(cfg)).get_config()})
    except Exception as e:  # a codec this numcodecs lacks
        out.append({"error": repr(e)})
json.dump(out, sys.stdout)
