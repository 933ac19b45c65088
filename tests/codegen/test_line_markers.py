"""Generated code names the Python lines it comes from: #line markers for the compiler and
profilers, comments for readers (codegen/cemit.py), and kernel symbols that are safe C names."""
import importlib.util
import os
import re
import subprocess

import pytest
from hypothesis import given, strategies as st

import opus
from opus import examples as ex, f32
from opus.codegen import kernel_symbol
from opus.runtime import amd_build, nvrtc
from opus.runtime.diagnostics import line_origins, strip_line_markers

HERE = os.path.abspath(__file__)


@opus.kernel
def shared_line(x: opus.Ptr[f32], n: opus.i32):
    g = opus.make_gmem(x, n)
    i = opus.thread_id_x() * 4
    v = g.load(i, vec=4)
    w = opus.fma(v, v, v) * v  # LINE: fma
    g.store(w, i, vec=4)


def _line(tag):
    with open(HERE) as f:
        return next(n for n, text in enumerate(f, 1) if text.rstrip().endswith(f"# LINE: {tag}"))


def test_kernel_source_names_python_lines_without_markers():
    src = shared_line.source(target="sm_90a")
    assert "#line" not in src
    n = _line("fma")
    assert f"  // test_line_markers.py:{n}  w = opus.fma(v, v, v) * v  # LINE: fma\n" in src
    marked = shared_line.specialize(target="sm_90a").source
    assert f'#line {_line("fma") - 2} "{HERE}"' in marked  # the first kernel line names the file
    assert strip_line_markers(marked) == src


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "gfx942", "gfx950"])
@pytest.mark.parametrize("kernel", [shared_line, ex.vector_add, ex.block_reduce],
                         ids=["shared_line", "vector_add", "block_reduce"])
def test_each_line_is_attributed_to_the_python_line_its_comment_names(kernel, arch):
    # the comments are written per run of lines; the markers must agree on every line of it
    marked = kernel.specialize(target=arch).source
    lines, origins = strip_line_markers(marked).split("\n"), line_origins(marked)
    comment = re.compile(r"^\s*// (\S+\.py):(\d+)(  |$)")
    named, checked = None, 0
    for text, origin in zip(lines, origins):
        m = comment.match(text)
        if m:
            named = (m.group(1), int(m.group(2)))
        elif named is not None and text.strip() not in ("}", ""):  # the kernel's end
            assert origin is not None and (os.path.basename(origin[0]), origin[1]) == named, text
            checked += 1
    assert checked > 5


def _with_undeclared_after(marked, line_text):
    """``marked`` with an undeclared identifier at the end of the generated line ``line_text``
    (the last line of a multi-line vector op; on the same line, so no line moves)."""
    return marked.replace(line_text + "\n", line_text + " opus_undeclared_for_test = 1;\n", 1)


def _last_lane_of_fma(marked):
    return next(l for l in marked.split("\n") if re.match(r"\s+v\d+\.v\[3\] = fmaf?\(", l) or
                re.match(r"\s+v\d+\.v\[3\] = __builtin_fmaf\(", l))


def test_nvrtc_itself_names_the_python_line_of_a_marked_line():
    marked = shared_line.specialize(target="sm_90a").source
    bad = _with_undeclared_after(marked, _last_lane_of_fma(marked))
    ok, log, _ = nvrtc._run(bad, "kernel.cu", nvrtc._default_options("sm_90a"), want_ptx=False)
    assert not ok and f'{HERE}({_line("fma")}): error' in log, log


def test_clang_itself_names_the_python_line_of_a_marked_line(tmp_path, requires_amd_compiler):
    marked = shared_line.specialize(target="gfx942").source
    bad = _with_undeclared_after(marked, _last_lane_of_fma(marked))
    (tmp_path / "k.hip").write_text(bad)
    cmd = requires_amd_compiler.command(*amd_build.FLAGS, "--offload-arch=gfx942",
                                        "-fsyntax-only", "k.hip")
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode != 0 and f'{HERE}:{_line("fma")}:' in r.stderr, r.stderr


def test_file_names_with_quotes_and_backslashes_reach_the_compiler(tmp_path):
    folder = tmp_path / 'we"ird\\dir'
    folder.mkdir()
    path = folder / "k.py"
    path.write_text("import opus\nfrom opus import f32\n\n@opus.kernel\n"
                    "def k(x: opus.Ptr[f32]):\n    x[0] = opus.exp(x[1])\n")
    spec = importlib.util.spec_from_file_location("opus_test_weird_path", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    marked = mod.k.specialize(target="sm_90a").source
    store = next(i for i, l in enumerate(strip_line_markers(marked).split("\n")) if "p_x_1[0] =" in l)
    assert line_origins(marked)[store] == (str(path), 6)
    bad = marked.replace("expf(", "opus_undeclared_for_test(")
    ok, log, _ = nvrtc._run(bad, "kernel.cu", nvrtc._default_options("sm_90a"), want_ptx=False)
    assert not ok and f"{path}(6): error" in log, log


@pytest.mark.parametrize("text, want", [
    ('we"ird\\dir', 'we\\"ird\\\\dir'),          # quote and backslash escaped
    ("a\nb\tc\x1fd\x7fe", "a\\012b\\011c\\037d\\177e"),   # controls and DEL as octal
    ("space ok XYZ", "space ok XYZ"),                   # a space and letters stay themselves
    ("caf\u00e9 \u0080\u00ff", "caf\u00e9 \u0080\u00ff")])  # past ASCII: as is (UTF-8)
def test_file_names_as_c_string_bodies(text, want):
    """C11 6.4.4.4 / 6.4.5 written out: a string literal's body escapes '"' and '\\'; the
    control characters below 0x20 and DEL are octal escapes; every other character stays."""
    from opus.codegen.cemit import _c_string
    assert _c_string(text) == want


def test_python_line_comments_by_hand(tmp_path):
    """The comment before each Python line's C lines: the file's base name, the line, its text
    as traced (or read from the file when the snapshot has none), without a final backslash
    or spaces (a backslash would splice the next C line into the comment), unprintable
    characters dropped, cut to 97 characters and "..." past 100."""
    from opus.codegen.cemit import _python_line_comment as comment
    from opus.ir.core import Loc
    f = tmp_path / "k.py"
    f.write_text("a = 1\n    y = x + 1   # why\n")
    assert comment(Loc(str(f), 2)) == "// k.py:2  y = x + 1   # why"
    assert comment(Loc(str(f), 2, text="  z = w  ")) == "// k.py:2  z = w"   # the snapshot
    assert comment(Loc("/no/such/m.py", 7)) == "// m.py:7"                    # no text at all
    assert comment(Loc("m.py", 3, text="s = t \\ \\  ")) == "// m.py:3  s = t"
    assert comment(Loc("m.py", 3, text="a\x07b\tc")) == "// m.py:3  abc"
    assert comment(Loc("m.py", 4, text="y = MAX")) == "// m.py:4  y = MAX"     # only \\ and spaces
    hundred = "x" * 100
    assert comment(Loc("m.py", 1, text=hundred)) == "// m.py:1  " + hundred
    assert comment(Loc("m.py", 1, text=hundred + "y")) == "// m.py:1  " + "x" * 97 + "..."


@pytest.mark.parametrize("name, want", [
    ("plain_name", "plain_name"), ("gr\u00f6\u00dfe", "gr_f6__df_e"), ("a_\u00e9", "a___e9_"),
    ("\u00e9", "_e9_"), ("_\u00e9", "___e9_")])
def test_c_identifiers_by_hand(name, want):
    """ASCII names as they are; in any other, "_" doubled and each non-ASCII character as
    _<hex code point>_ (the docstring's own example included)."""
    from opus.codegen.cemit import c_identifier
    assert c_identifier(name) == want


# -- kernel symbols ----------------------------------------------------------------------------

def _decode(symbol):
    """The kernel name back from its symbol (written here from the scheme's description)."""
    if symbol.endswith("_opus_u"):
        body, out, i = symbol[:-len("_opus_u")], [], 0
        while i < len(body):
            if body[i] != "_":
                out.append(body[i])
                i += 1
            elif body[i + 1] == "_":
                out.append("_")
                i += 2
            else:
                end = body.index("_", i + 1)
                out.append(chr(int(body[i + 1:end], 16)))
                i = end + 1
        return "".join(out)
    assert symbol.endswith("_opus")
    return symbol[:-len("_opus")]


identifiers = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1,
                      max_size=12).filter(str.isidentifier)


@given(identifiers)
def test_symbols_are_ascii_c_identifiers_that_name_one_kernel(name):
    sym = kernel_symbol(name)
    assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", sym)
    assert _decode(sym) == name  # one to one: two kernel names never share a symbol


def test_markers_and_comments_by_hand():
    """with_line_markers on hand-made lines: a comment before each run of lines from one Python
    line (not repeated within the run), the file named only where it changes, and a marker
    only where the compiler's own count (one more per line, comments included) would be wrong:
    the comment before "h" brings that count to 9, so "h" needs none."""
    from opus.codegen.cemit import with_line_markers
    from opus.ir.core import Loc
    f1, f2 = Loc("/k/f1.py", 10, "k", "x = 1"), Loc("/k/f1.py", 11, "k", "y = 2")
    f5, f7, f9 = (Loc("/k/f2.py", n, "h", f"v{n} = 0") for n in (5, 7, 9))
    lines = ["a", "  b", "  c", "  d", "e", "f", "g", "h"]
    locs = [None, f1, f1, f2, f5, None, f7, f9]
    assert with_line_markers(lines, locs) == [
        "a",
        "  // f1.py:10  x = 1", '  #line 10 "/k/f1.py"', "  b",
        "  #line 10", "  c",
        "  // f1.py:11  y = 2", "  #line 11", "  d",
        "// f2.py:5  v5 = 0", '#line 5 "/k/f2.py"', "e",
        "f",
        "// f2.py:7  v7 = 0", "#line 7", "g",
        "// f2.py:9  v9 = 0", "h"]


@opus.kernel
def branchy(x: opus.Ptr[f32], n: opus.i32):
    t = opus.thread_id_x()
    if t < n:  # LINE: if
        x[t] = 1.0
    else:
        x[t] = 2.0
    x[t + 64] = 3.0


def test_lines_after_a_nested_op_keep_the_enclosing_ops_line():
    """The if's own lines written after its branches' ops ("} else {", the closing brace) are
    the if's line, not unknown: the location is restored to the enclosing op's after each op."""
    from opus.codegen.cuda import CudaEmitter
    spec = branchy.specialize(target="sm_80")
    em = CudaEmitter(spec.function, spec.target)
    em.render()
    n = _line("if")
    where = {text.strip(): loc for text, loc in zip(em.lines, em.line_locs)}
    assert where["} else {"].line == n and where["if (v4) {"].line == n
    closing = [loc for text, loc in zip(em.lines, em.line_locs) if text == "  }"]
    assert len(closing) == 1 and closing[0].line == n
