"""The plugin module itself: its entry point, the pinned mypy range, its name matching."""

from __future__ import annotations

import pytest

from containers import mypy as plugin_module


@pytest.mark.parametrize("version", ["2.4.0", "2.4.1", "2.4.2+dev.1a2b3c"])
def test_supported_versions_start_quietly(
    version: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mypy inside MYPY_VERSIONS gets the plugin and no message."""
    assert plugin_module.plugin(version) is plugin_module.ContainersPlugin
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("version", ["1.19.1", "2.3.0", "2.5.0", "3.0.0+dev"])
def test_other_versions_are_reported(version: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A mypy outside MYPY_VERSIONS is told so on stderr, and the plugin still loads."""
    assert plugin_module.plugin(version) is plugin_module.ContainersPlugin
    assert capsys.readouterr().err == (
        f"containers.mypy: mypy {version} is outside the tested range >=2.4,<2.5; the "
        f"plugin may report wrong types or crash. Install a mypy in that range, or remove "
        f"containers.mypy from plugins= to use the declared signatures.\n"
    )


def test_installed_mypy_is_supported() -> None:
    """The mypy the tests run is one the plugin supports (bump MYPY_VERSIONS with care)."""
    import mypy.version

    assert plugin_module._version_supported(mypy.version.__version__)


@pytest.mark.parametrize(
    ("fullname", "name"),
    [
        ("containers.fmap", "fmap"),
        ("containers._fmap.fmap", "fmap"),
        ("containers._decorator.container", "container"),
        ("containers.mypy.plugin", None),
        ("containers.serialization.fmap", None),
        ("mycontainers._fmap.fmap", None),
        ("fmap", None),
    ],
)
def test_hooks_match_the_public_names(fullname: str, name: str | None) -> None:
    """Hooks attach to containers' own functions wherever the package defines them."""
    assert plugin_module._api_name(fullname) == name
