"""The documentation site (mkdocs.yml, docs/): every public name has a docstring and an
API entry, every page is in the navigation, and ``mkdocs build --strict`` succeeds and
makes pages that load nothing from other hosts.

The docs' own examples run elsewhere, as doctests (``--doctest-glob=*.md``).
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import griffe
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"

#: The modules whose ``__all__`` is the public API the site documents.
PUBLIC_MODULES = (
    "containers",
    "containers.composite",
    "containers.filters",
    "containers.interop",
    "containers.mypy",
)

#: An API entry: mkdocstrings' directive on a line of its own.
DIRECTIVE = re.compile(r"^::: ([\w.]+)[ \t]*$", re.MULTILINE)

#: Where to add what is missing, for the failure messages.
HOW_TO_ADD = (
    "Add a line `::: <name>` to the page of docs/reference/ that fits ({pages}), or to a "
    "new page there listed under 'API reference' in mkdocs.yml's nav (docs/contributing.md)."
)


def _public_names() -> list[str]:
    names = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        names += [f"{module_name}.{name}" for name in module.__all__]
    return names


def _api_entries() -> dict[str, list[str]]:
    entries: dict[str, list[str]] = {}
    for page in sorted(DOCS.rglob("*.md")):
        for match in DIRECTIVE.finditer(page.read_text(encoding="utf-8")):
            entries.setdefault(match.group(1), []).append(page.relative_to(ROOT).as_posix())
    return entries


def _how_to_add() -> str:
    pages = ", ".join(sorted(p.name for p in REFERENCE.glob("*.md")))
    return HOW_TO_ADD.format(pages=pages)


def test_every_public_name_has_a_docstring() -> None:
    """Each name of the public modules' ``__all__`` has a docstring, read as mkdocstrings
    reads it (griffe, statically: a constant's docstring is the string after it)."""
    package = griffe.load(
        "containers",
        search_paths=[str(ROOT / "src")],
        resolve_aliases=True,
        resolve_external=False,
    )
    missing = []
    for name in _public_names():
        try:
            obj = package[name.removeprefix("containers").lstrip(".")] if "." in name else package
            target = obj.final_target if obj.is_alias else obj
        except (KeyError, griffe.AliasResolutionError) as error:
            missing.append(f"{name} (griffe cannot find it statically: {error!r})")
            continue
        if target.docstring is None or not target.docstring.value.strip():
            missing.append(f"{name} ({target.relative_filepath}:{target.lineno})")
    assert not missing, (
        "These public names have no docstring, so the documentation site would show an "
        "empty API entry for them:\n  " + "\n  ".join(missing) + "\nWrite one (Google "
        "style: summary, semantics, Examples:, Args:, Returns:, Raises:); for a module "
        "constant or a type alias, a string literal on the line after the assignment."
    )


def test_every_public_name_has_an_api_entry() -> None:
    """Each name of the public modules' ``__all__`` has a ``::: name`` entry on an API
    page, so a new public name cannot be left out of the site."""
    entries = _api_entries()
    missing = [name for name in _public_names() if name not in entries]
    assert not missing, (
        "These public names have no API entry on the documentation site:\n  "
        + "\n  ".join(missing)
        + "\n"
        + _how_to_add()
    )


def test_api_entries_name_public_names_once() -> None:
    """Every ``::: name`` entry documents a public name, and each name has one entry."""
    public = set(_public_names())
    entries = _api_entries()
    stale = [
        f"{name} ({', '.join(pages)})" for name, pages in entries.items() if name not in public
    ]
    twice = [f"{name} ({', '.join(pages)})" for name, pages in entries.items() if len(pages) > 1]
    assert not stale, (
        "These API entries name objects that are not public (in no __all__ of "
        f"{', '.join(PUBLIC_MODULES)}):\n  " + "\n  ".join(stale) + "\nRemove the entries, "
        "or add the names to their module's __all__."
    )
    assert not twice, "These names have more than one API entry:\n  " + "\n  ".join(twice)


class _IgnoreTags(yaml.SafeLoader):
    """A YAML loader that reads mkdocs.yml's ``!!python/name:`` and ``!ENV`` tags as None."""


_IgnoreTags.add_multi_constructor("", lambda loader, suffix, node: None)


def _nav_pages(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node] if node.endswith(".md") else []
    if isinstance(node, dict):
        return [page for value in node.values() for page in _nav_pages(value)]
    if isinstance(node, list):
        return [page for value in node for page in _nav_pages(value)]
    return []


def test_every_docs_page_is_in_the_nav() -> None:
    """Every Markdown file under docs/ is a page of mkdocs.yml's nav, and every nav entry
    is a file (mkdocs --strict fails on both, with a less direct message)."""
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_IgnoreTags)
    nav = _nav_pages(config["nav"])
    files = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    absent = [f"docs/{page}" for page in files if page not in nav]
    dangling = [page for page in nav if not (DOCS / page).is_file()]
    assert not absent, (
        "These pages are not in mkdocs.yml's nav, so the site would not link to them:\n  "
        + "\n  ".join(absent)
        + "\nAdd each one to nav: (a guide under 'Guides', an API page under "
        "'API reference')."
    )
    assert not dangling, "mkdocs.yml's nav lists pages that docs/ does not have: " + ", ".join(
        dangling
    )


@pytest.fixture(scope="module")
def build(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``mkdocs build --strict`` of the site into a temporary directory, run once."""
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        # Material prints a notice about MkDocs 2.0 on every build unless told not to.
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
        check=False,
    )
    return result, out


@pytest.fixture(scope="module")
def site(build: tuple[subprocess.CompletedProcess[str], Path]) -> Path:
    """The built site; a failed build fails in test_site_builds_strict, and here briefly."""
    result, out = build
    if result.returncode != 0:
        pytest.fail("mkdocs build --strict failed: see test_site_builds_strict", pytrace=False)
    return out


def test_site_builds_strict(build: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    """``mkdocs build --strict`` succeeds (no broken link or anchor, no page left out of
    the nav, no docstring mkdocstrings cannot parse) and writes the home page."""
    result, out = build
    log = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
    # Warnings and their continuation lines: what strict mode stopped on.
    problems = [line for line in log if not line.startswith("INFO") and "│" not in line]
    assert result.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(
        problems or log[-30:]
    )
    for page in ["index.html", "tutorial.html", "api.html", "coming-from-jax.html"]:
        assert (out / page).is_file(), page


def test_every_public_name_is_rendered(site: Path) -> None:
    """The built API pages hold an entry (an element with the name as id) for every
    public name: signature, types and docstring come from mkdocstrings."""
    ids: set[str] = set()
    for page in (site / "reference").glob("*.html"):
        ids.update(re.findall(r'\bid="([^"]+)"', page.read_text(encoding="utf-8")))
    missing = [name for name in _public_names() if name not in ids]
    assert not missing, "The built site has no API entry for:\n  " + "\n  ".join(missing)


#: Attributes through which a page loads something (links to follow are fine).
_RESOURCE_ATTRIBUTES = {
    "script": ("src",),
    "link": ("href",),
    "img": ("src", "srcset"),
    "iframe": ("src",),
    "source": ("src", "srcset"),
    "audio": ("src",),
    "video": ("src", "poster"),
    "embed": ("src",),
    "object": ("data",),
    "input": ("src",),
    "track": ("src",),
}
_CSS_URL = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])([^'")\s]+)""")


def _external(url: str) -> bool:
    return url.strip().lower().startswith(("http:", "https:", "//", "ftp:"))


class _Resources(HTMLParser):
    """The URLs a page loads: resource attributes, inline styles and style elements."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in _RESOURCE_ATTRIBUTES.get(tag, ()):
                self.urls += [part.split()[0] for part in value.split(",") if part.strip()]
            elif name == "style":
                self.urls += _CSS_URL.findall(value)
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.urls += _CSS_URL.findall(data)


def test_site_loads_nothing_from_other_hosts(site: Path) -> None:
    """No page of the built site loads a script, style sheet, font, image or frame from
    another host, and no style sheet imports one: the site works offline."""
    found = []
    for page in sorted(site.rglob("*.html")):
        parser = _Resources()
        parser.feed(page.read_text(encoding="utf-8"))
        found += [f"{page.relative_to(site)}: {url}" for url in parser.urls if _external(url)]
    for sheet in sorted(site.rglob("*.css")):
        urls = _CSS_URL.findall(sheet.read_text(encoding="utf-8"))
        found += [f"{sheet.relative_to(site)}: {url}" for url in urls if _external(url)]
    assert not found, (
        "The built site loads these from other hosts, so it does not work offline:\n  "
        + "\n  ".join(found)
        + "\nShip the file in docs/assets/ instead (see docs/contributing.md)."
    )
