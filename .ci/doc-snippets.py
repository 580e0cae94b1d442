#!/usr/bin/env python3
"""Writes the fenced `python`, `js`, `go` and `java` blocks of a Markdown page into OUT so CI can
build or load each against the installed SDK packages (.ci/sdk-packages.sh):

    OUT/python/snippetN.py    OUT/js/snippetN.cjs    OUT/go/snippetN/main.go
    OUT/java/<Class>.java     OUT/spring/<Class>.java  (a block that imports xjob.spring)

Fails when a language has no block at all, so a renamed fence cannot leave a language unchecked.
Usage: doc-snippets.py PAGE.md OUT
"""
import pathlib
import re
import sys

LANGUAGES = ("python", "js", "go", "java")


def main() -> int:
    page, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    blocks = re.findall(r"^```(\w+)[ \t]*\n(.*?)^```[ \t]*$", page.read_text(), re.S | re.M)
    counts = dict.fromkeys(LANGUAGES, 0)
    for language, body in blocks:
        if language not in counts:
            continue
        counts[language] += 1
        number = counts[language]
        if language == "python":
            path = out / "python" / f"snippet{number}.py"
        elif language == "js":
            path = out / "js" / f"snippet{number}.cjs"
        elif language == "go":
            path = out / "go" / f"snippet{number}" / "main.go"
        else:
            name = re.search(r"^public (?:final )?class (\w+)", body, re.M)
            if name is None:
                print(f"{page}: java block {number} has no public class", file=sys.stderr)
                return 1
            project = "spring" if "import xjob.spring." in body else "java"
            path = out / project / f"{name.group(1)}.java"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    missing = [language for language, count in counts.items() if count == 0]
    if missing:
        print(f"{page}: no {', '.join(missing)} block", file=sys.stderr)
        return 1
    print(" ".join(f"{language}={count}" for language, count in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
