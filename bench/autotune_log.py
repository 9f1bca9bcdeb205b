"""Print the autotune entries cached on disk whose kernel name matches a pattern: the chosen config
and every timed candidate, fastest first. Run after a benchmark with the same TRITONIZE_CACHE_DIR:

    TRITONIZE_CACHE_DIR=/tmp/tc python3 bench/autotune_log.py red_fused_sum [--top 8]
"""
from __future__ import annotations

import argparse
import re

from tritonize.runtime import disk_cache


def entries(pattern: str):
    root = disk_cache.cache_root()
    for path in sorted((root / "autotune").glob("*.json")) if root else []:
        entry = disk_cache.read_json(path)
        if isinstance(entry, dict) and re.search(pattern, entry.get("kernel", "")):
            yield entry


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pattern", help="regular expression searched in the kernel name")
    parser.add_argument("--top", type=int, default=8, help="candidates shown per entry")
    args = parser.parse_args(argv)
    for entry in entries(args.pattern):
        timings = sorted(entry.get("timings_us", {}).items(), key=lambda item: item[1])
        print(f"{entry['kernel']}: best {entry['best']} ({len(timings)} timed, mode {entry.get('mode')})")
        for config, micros in timings[:args.top]:
            print(f"    {micros:9.2f} us  {config}")


if __name__ == "__main__":
    main()
