"""python -m tritonize.profile script.py [--html out.html] [-- the script's arguments]

Runs the script, prints the profile of every graph it compiled with tritonize (see the package's
docstring), writes the HTML page when asked, and exits with the script's exit code (a script that
fails or calls sys.exit still gets the profile of what it compiled)."""
from __future__ import annotations

import argparse
import sys

from .session import profile_script


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tritonize.profile", description=__doc__.splitlines()[0],
                                     epilog="The script's own arguments follow `--`.")
    parser.add_argument("script")
    parser.add_argument("--html", default=None, help="write the profile's page there")
    argv = sys.argv[1:] if argv is None else list(argv)
    ours, script_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    options = parser.parse_args(ours)
    prof, code = profile_script(options.script, script_args)
    print(prof)
    if options.html:
        prof.save_html(options.html)
        print(f"wrote {options.html}")
    return code


if __name__ == "__main__":
    sys.exit(main())
