#!/usr/bin/env python3
"""Symbolizes ThreadSanitizer reports written with TSAN_OPTIONS=symbolize=0.

Why not TSan's own symbolizer: while it symbolizes it closes files, and close() is the shim's
interposer, which takes locks a race check inside the report then waits on (the report holds
TSan's registry lock): the process hangs in its own report. So tsan.sh runs with symbolize=0 and
this script turns each frame "#N <null> <null> (module+0xOFF)" into "#N function file:line" with
addr2line. Usage: tsan_symbolize.py DIR [LOG...] (DIR holds the TSan-built librdmasock.so and
programs; other modules are looked up with ldconfig -p)."""
import os
import re
import subprocess
import sys

FRAME = re.compile(r'^(\s*#\d+ )<null> <null> \(([^+()]+)\+(0x[0-9a-f]+)\)\s*$')


def module_path(build, name, cache={}):
    if name in cache:
        return cache[name]
    path = os.path.join(build, name)
    if not os.path.exists(path):
        path = None
        try:
            out = subprocess.run(['ldconfig', '-p'], capture_output=True, text=True).stdout
            for line in out.splitlines():
                if line.strip().startswith(name + ' ') and '=>' in line:
                    path = line.split('=>')[1].strip()
                    break
        except OSError:
            pass
    cache[name] = path
    return path


def symbolize(build, module, off, cache={}):
    key = (module, off)
    if key in cache:
        return cache[key]
    path = module_path(build, module)
    text = None
    if path:
        # The return address points after the call: look up the byte before it.
        addr = hex(max(int(off, 16) - 1, 0))
        out = subprocess.run(['addr2line', '-f', '-C', '-i', '-e', path, addr],
                             capture_output=True, text=True).stdout.split('\n')
        pairs = [(out[i], out[i + 1]) for i in range(0, len(out) - 1, 2) if out[i]]
        parts = [f'{fn} {os.path.relpath(loc) if loc.startswith("/") else loc}' for fn, loc in pairs
                 if fn != '??']
        text = ' <- '.join(parts) if parts else None
    cache[key] = text
    return text


def main():
    build = sys.argv[1]
    files = sys.argv[2:] or ['-']
    for f in files:
        stream = sys.stdin if f == '-' else open(f, errors='replace')
        for line in stream:
            m = FRAME.match(line)
            if m:
                s = symbolize(build, m.group(2), m.group(3))
                if s:
                    line = f'{m.group(1)}{s} ({m.group(2)}+{m.group(3)})\n'
            sys.stdout.write(line)


if __name__ == '__main__':
    main()
