"""The HTML view (ct.html, ct.display, ct.notebook, the IPython extension) and the
views @container gives its classes (repr, _repr_pretty_, __rich_repr__): what the page
says, that every user string is escaped, and how IPython and rich show trees."""

from __future__ import annotations

import html.parser
import os
import re
import tempfile
from typing import Any

import numpy as np
import pytest

import containers as ct
from containers._display import pformat


@ct.container(children=["w", "b"], keep=["name"])
class Dense:
    w: Any
    b: Any
    name: str = "dense"
    cache: dict = ct.field(default_factory=dict)


@ct.container(frozen=False)
class Model:
    layers: list
    head: Any = None


class Tags(html.parser.HTMLParser):
    """Every tag and attribute of a page, as a browser's parser reads them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def parse(page: str) -> list[tuple[str, dict[str, str | None]]]:
    """The tags of ``page``."""
    parser = Tags()
    parser.feed(page)
    return parser.tags


def model() -> Model:
    """A small model: two layers sharing their bias, a head with a NaN and an inf."""
    rng = np.random.default_rng(0)
    b = np.zeros(4, "float32")
    return Model(
        [
            Dense(rng.standard_normal((4, 4)).astype("float32"), b, "first"),
            Dense(rng.standard_normal((4, 4)).astype("float32"), b, "second"),
        ],
        head=Dense(np.array([1.0, np.nan, np.inf, 3.0]), np.array(2.0), "head"),
    )


# --- what the page says ----------------------------------------------------------------------


def test_arrays_show_dtype_shape_statistics_and_bad_values():
    """An array row gives dtype[shape], mean, std, min and max of the finite values, and
    the counts of NaN and inf."""
    page = ct.html({"x": np.array([1.0, np.nan, np.inf, 3.0])})
    assert "float64[4]" in page
    assert "\u03bc=2 \u03c3=1 [1, 3]" in page
    assert "1 NaN" in page
    assert "1 inf" in page


def test_small_arrays_get_a_histogram_or_a_heatmap():
    """A small 1-D array gets an inline SVG histogram; a small 2-D one an inline PNG
    heatmap (a data URI, nothing fetched)."""
    tags = parse(ct.html({"v": np.arange(50.0), "m": np.eye(8)}))
    assert [t for t, _ in tags].count("svg") == 1
    images = [a for t, a in tags if t == "img"]
    assert len(images) == 1
    assert str(images[0]["src"]).startswith("data:image/png;base64,")


def test_subtrees_total_their_parameters_and_bytes():
    """Each node's summary gives the parameters and bytes of its subtree, a shared array
    counted once, where it is shown."""
    page = ct.html(model())
    # 16 + 4 + 16 (b shared) + 4 + 1 = 41 params; 64 + 16 + 64 + 32 + 8 = 184 bytes
    assert "41 params \u00b7 184 B" in page
    assert "36 params \u00b7 144 B" in page  # the layers list
    assert "20 params \u00b7 80 B" in page  # the first layer


def test_shared_objects_are_shown_once_and_marked_where_they_recur():
    """The second reference to a shared array says where the original is, and links to
    its row by id."""
    page = ct.html(model())
    assert "same as .layers[0].b" in page
    goto = re.search(r'data-goto="([^"]+)"', page)
    assert goto is not None
    assert f'id="{goto.group(1)}"' in page


def test_cycles_are_marked_instead_of_raising():
    """A list inside itself shows 'cycle: back to' its ancestor; pformat still raises."""
    loop: list[Any] = [1]
    loop.append(loop)
    page = ct.html({"a": loop})
    assert "cycle: back to [&#x27;a&#x27;]" in page
    with pytest.raises(ct.StructureError, match="reference cycle"):
        pformat({"a": loop})


def test_kept_and_reset_fields_are_told_apart():
    """A kept field is marked 'kept', a reset field 'reset', each with its value."""
    page = ct.html(Dense(np.zeros(2), np.zeros(2), "fc", cache={"hit": 1}))
    assert re.search(r"name</span> <span class=\"ct-badge\"[^>]*>kept</span>", page)
    assert re.search(r"cache</span> <span class=\"ct-badge\"[^>]*>reset</span>", page)
    assert "{&#x27;hit&#x27;: 1}" in page


def test_keys_carry_their_keystr_path():
    """Every key's data-path is its keystr path, which a click copies."""
    paths = {a.get("data-path") for _, a in parse(ct.html(model()))}
    assert {"", ".layers", ".layers[0]", ".layers[0].w", ".head.b"} <= paths


def test_nodes_fold_below_expand_depth():
    """The root and nodes shallower than expand_depth start open; deeper ones folded."""
    details = [a for t, a in parse(ct.html(model(), expand_depth=2)) if t == "details"]
    opened = ["open" in a for a in details]
    assert opened == [True, True, False, False, True]  # root, layers, 2 layers, head
    details = [a for t, a in parse(ct.html(model(), expand_depth=0)) if t == "details"]
    assert ["open" in a for a in details] == [True, False, False, False, False]


def test_node_types_are_named():
    """Each node's line names its type: builtins by name, classes by their name."""
    import collections

    point = collections.namedtuple("Point", "x y")
    tree = {"d": collections.defaultdict(list, a=[1]), "o": collections.OrderedDict(b=2)}
    tree["p"] = point(1, 2)
    names = re.findall(r'class="ct-type">([^<]*)<', ct.html(tree))
    assert names == ["dict", "defaultdict", "list", "OrderedDict", "Point"]


def test_dicts_show_insertion_order():
    """Keys appear in the dict's own order, not flatten's sorted order."""
    page = ct.html({"zeta": 1, "alpha": 2})
    assert page.index("zeta") < page.index("alpha")


def test_a_leaf_without_data_shows_dtype_and_shape_only():
    """A lazy leaf (shape and dtype, data not in memory) is summarized without reading it."""

    class Lazy:
        shape = (1024, 1024)
        dtype = np.dtype("float32")

        def __array__(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the view read a lazy leaf's data")

    page = ct.html({"w": Lazy()})
    assert "float32[1024,1024]" in page
    assert "4.0 MiB" in page
    assert "\u03bc=" not in page


def test_torch_and_jax_arrays_get_statistics():
    """Tensors (bfloat16 included) and jax arrays are summarized with statistics."""
    torch = pytest.importorskip("torch")
    jnp = pytest.importorskip("jax.numpy")
    page = ct.html(
        {"t": torch.arange(4, dtype=torch.bfloat16), "j": jnp.arange(4, dtype=jnp.float32)}
    )
    assert "bfloat16[4]" in page
    assert "float32[4]" in page
    assert page.count("\u03bc=1.5") == 2


def test_large_trees_are_cut_with_a_count():
    """100,000 leaves render at most max_nodes rows; the rest is counted with its totals."""
    tree = {"xs": [np.zeros(2, "float32") for _ in range(100_000)]}
    page = ct.html(tree, max_nodes=500)
    assert page.count('class="ct-row"') <= 500
    assert "99,502 more not shown (199,004 params, 777.4 KiB)" in page
    assert "200,000 params \u00b7 781.2 KiB" in page
    assert len(page) < 500_000


def test_stats_false_gives_dtype_and_shape_only():
    """stats=False skips statistics and plots."""
    page = ct.html({"v": np.arange(10.0)}, stats=False)
    assert "float64[10]" in page
    assert "\u03bc=" not in page
    assert "<svg" not in page


# --- safety ----------------------------------------------------------------------------------

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_every_user_string_is_escaped():
    """Hostile keys, kept values, leaf reprs and class names come out as text: the page
    has only the view's own tags and the root's own click handler."""
    Evil = ct.container(children=["x"], keep=["label"])(
        type(HOSTILE, (), {"__annotations__": {"x": Any, "label": str}})
    )
    tree = {HOSTILE: [Evil(HOSTILE, HOSTILE)], "k": HOSTILE}
    page = ct.html(tree)
    tags = parse(page)
    assert {t for t, _ in tags} <= {"div", "style", "span", "details", "summary"}
    handlers = [(t, k) for t, a in tags for k in a if k.startswith("on")]
    assert handlers == [("div", "onclick")]
    assert "<script" not in page
    assert "&lt;script&gt;" in page


def test_the_page_loads_nothing_from_elsewhere():
    """No URL to fetch: no http(s), no external stylesheet, script or font."""
    page = ct.html(model())
    assert not re.search(r"https?:|@import|url\(|<link|<script|src=\"(?!data:)", page)


# --- Display, Structure, inspect ------------------------------------------------------------


def test_display_is_html_in_notebooks_and_pformat_elsewhere():
    """ct.display's _repr_html_ is the view, its repr pformat's text."""
    tree = {"w": np.zeros(3, "float32")}
    shown = ct.display(tree, expand_depth=1)
    assert repr(shown) == pformat(tree)
    assert 'class="ct-view"' in shown._repr_html_()


def test_structure_has_an_html_view_with_leaf_slots():
    """A Structure's _repr_html_ shows its tree with '*' at each leaf position."""
    s = ct.structure(Dense(np.zeros(2), np.zeros(2), "fc"))
    page = s._repr_html_()
    assert page.count(">*</span>") == 2
    assert "Dense" in page
    assert "fc" in page


def test_inspect_file_view_has_an_html_view():
    """inspect's result shows as collapsible HTML with each row's keystr path."""
    path = os.path.join(tempfile.mkdtemp(), "m.safetensors")
    ct.save(path, {"w": np.zeros((2, 3), "float32"), HOSTILE: 1})
    page = ct.inspect(path)._repr_html_()
    assert "float32[2,3]" in page
    assert 'data-path="[&#x27;w&#x27;]"' in page
    assert "<script" not in page


# --- IPython, rich and repr ------------------------------------------------------------------


@pytest.fixture
def shell() -> Any:
    """A real IPython shell (in process), its HTML formatter cleaned up afterwards."""
    interactiveshell = pytest.importorskip("IPython.core.interactiveshell")
    sh = interactiveshell.InteractiveShell.instance()
    yield sh
    ct.notebook(False, ipython=sh)
    interactiveshell.InteractiveShell.clear_instance()


def test_notebook_makes_ipython_show_containers_as_html(shell: Any):
    """After ct.notebook(), IPython formats a container (and a class declared later) as
    the view; builtins and classes stay untouched; notebook(False) undoes it."""
    ct.notebook(ipython=shell)
    data, _ = shell.display_formatter.format(Dense(np.zeros(2), np.zeros(2)))
    assert 'class="ct-view"' in data["text/html"]
    assert "text/html" not in shell.display_formatter.format({"a": 1})[0]
    assert "_repr_html_" not in vars(Dense)

    @ct.container
    class Later:
        x: Any

    assert "text/html" in shell.display_formatter.format(Later(1))[0]
    ct.notebook(False, ipython=shell)
    assert "text/html" not in shell.display_formatter.format(Later(1))[0]


def test_load_ext_containers_is_the_same(shell: Any):
    """%load_ext containers finds load_ipython_extension in the package."""
    shell.run_line_magic("load_ext", "containers")
    data, _ = shell.display_formatter.format(Dense(np.zeros(2), np.zeros(2)))
    assert 'class="ct-view"' in data["text/html"]
    shell.run_line_magic("unload_ext", "containers")
    assert "text/html" not in shell.display_formatter.format(Dense(np.zeros(2), np.zeros(2)))[0]


def test_ipython_pretty_prints_a_container_as_pformat():
    """IPython's pretty printer (the terminal's display) shows pformat's view."""
    pretty = pytest.importorskip("IPython.lib.pretty")
    m = model()
    assert pretty.pretty(m) == pformat(m)


def test_rich_shows_fields_with_arrays_summarized():
    """rich's pretty printer reads __rich_repr__: fields, arrays as dtype[shape]."""
    rich_pretty = pytest.importorskip("rich.pretty")
    text = rich_pretty.pretty_repr(Dense(np.zeros((64, 64), "float32"), np.zeros(64), "fc"))
    assert text == "Dense(w=float32[64,64], b=float64[64], name='fc', cache={})"


def test_print_of_a_model_with_big_arrays_stays_short():
    """repr summarizes arrays numpy would elide (over 1000 elements) by dtype and shape;
    small arrays keep numpy's repr."""
    layers = [Dense(np.zeros((1024, 1024), "float32"), np.zeros(1024, "float32")) for _ in "abc"]
    text = repr(layers)
    assert text.count("\n") == 0
    assert text.count("Dense(w=float32[1024,1024], b=float32[1024], name='dense', cache={})") == 3
    small = Dense(np.ones(2), np.zeros(2))
    assert repr(small) == "Dense(w=array([1., 1.]), b=array([0., 0.]), name='dense', cache={})"


def test_a_class_own_repr_is_kept():
    """@container keeps a __repr__ (and _repr_pretty_) the class defines itself."""

    @ct.container
    class Own:
        x: Any

        def __repr__(self) -> str:
            return "mine"

    assert repr(Own(1)) == "mine"


def test_a_cycle_shows_in_terminals_without_an_error():
    """A cyclic tree's display repr and a cyclic container's IPython text say what they
    can instead of raising pformat's cycle error."""
    pretty = pytest.importorskip("IPython.lib.pretty")
    loop: list[Any] = []
    loop.append(loop)
    assert repr(ct.display(loop)).startswith("<a tree pformat cannot print: pformat: the tree")
    m = Model([])
    m.layers.append(m)
    assert pretty.pretty(m) == "Model(layers=[...], head=None)"


def test_a_recursive_repr_does_not_loop():
    """A mutable container that holds itself reprs with '...' as a dataclass does."""

    @ct.container(frozen=False)
    class Box:
        x: Any

    box = Box(None)
    box.x = [box]
    assert repr(box) == "test_a_recursive_repr_does_not_loop.<locals>.Box(x=[...])"


# --- review fixes ----------------------------------------------------------------------


class Nesting(html.parser.HTMLParser):
    """The deepest nesting of elements in a page."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = self.deepest = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.depth += 1
        self.deepest = max(self.deepest, self.depth)

    def handle_endtag(self, tag: str) -> None:
        self.depth -= 1


def test_a_deep_tree_nests_no_deeper_than_browsers_lay_out():
    """A chain of 10,000 lists: the page nests at most MAX_NESTING levels (Chromium's
    parser stops at 512 elements), and says where the rest is and how to see it."""
    from containers._html import MAX_NESTING

    deep: list[Any] = []
    cur = deep
    for _ in range(10_000):
        cur.append([])
        cur = cur[0]
    cur.append(1.0)
    page = ct.html(deep, expand_depth=10**6, max_nodes=10**6)
    nesting = Nesting()
    nesting.feed(page)
    assert nesting.deepest < 512
    assert page.count("<details") == MAX_NESTING + 1
    assert f"nested deeper than {MAX_NESTING} levels" in page


def test_a_huge_key_does_not_repeat_on_every_row_below_it():
    """A key of 100,000 characters above 1,000 leaves: the page stays small (its rows'
    paths are cut in their tooltips, and not copyable), not 200 MB."""
    page = ct.html({"x" * 100_000: [float(i) for i in range(1000)]})
    assert len(page) < 3_000_000
    assert "too long to copy" in page


def test_bad_view_options_are_refused_with_how_to_fix():
    """max_nodes=, expand_depth= and stats= of the wrong type or sign: clear errors."""
    with pytest.raises(TypeError, match=r"html: max_nodes= must be an int \(the most rows"):
        ct.html([1], max_nodes="10")
    with pytest.raises(ValueError, match=r"html: expand_depth= must be >= 0 \(0 opens"):
        ct.html([1], expand_depth=-1)
    with pytest.raises(TypeError, match="html: stats= must be True or False, got 'no'"):
        ct.html([1], stats="no")
    with pytest.raises(TypeError, match="display: max_nodes= must be an int"):
        ct.display([1], max_nodes=1.5)


class BrokenRepr:
    """A half-built object: its repr raises."""

    def __repr__(self) -> str:
        raise RuntimeError("not initialized")


def test_a_leaf_or_key_whose_repr_raises_is_shown_not_fatal():
    """html and pformat show a stand-in for an object whose __repr__ raises, as a leaf,
    as a dict key (in the path too) and in a preview, and render the rest."""
    tree = {"a": BrokenRepr(), BrokenRepr(): [1.0], "n": {"x": BrokenRepr()}}
    stand_in = "&lt;BrokenRepr object: repr raised RuntimeError&gt;"
    page = ct.html(tree)
    assert stand_in in page
    assert "[&lt;BrokenRepr object: repr raised RuntimeError&gt;][0]" in page  # a path
    text = pformat(tree)
    assert "'a': <BrokenRepr object: repr raised RuntimeError>" in text
    assert "<BrokenRepr object: repr raised RuntimeError>: [1.0]" in text


def test_statistics_stop_at_the_views_budget():
    """Arrays each under STATS_LIMIT but many together: statistics read at most
    STATS_BUDGET elements in all; the arrays after say they have none, and why."""
    from containers._html import STATS_BUDGET, STATS_LIMIT

    n = STATS_BUDGET // STATS_LIMIT + 1
    tree = {f"w{i}": np.full(STATS_LIMIT, i, dtype=np.uint8) for i in range(n)}
    page = ct.html(tree)
    assert page.count("\u03bc=") == n - 1
    assert page.count("the view's budget is spent") == 1
