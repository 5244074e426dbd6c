"""Token alignment against a brute-force reference on random nested-span trees."""

from __future__ import annotations

import numpy as np
import pytest

from structpos import Structure, StructureError
from structpos.align import OUTSIDE, SPECIAL, STRADDLE, WHITESPACE, align


def random_tree(rng: np.random.Generator, n_chars: int = 200, max_nodes: int = 80) -> Structure:
    """Random preorder tree whose spans nest: each node splits its span among children."""
    words = rng.choice(list("abc xyz()+ \n"), size=n_chars)
    source = "".join(words)
    labels, start, end, parent = [], [], [], []

    stack = [(0, n_chars, -1)]
    while stack and len(labels) < max_nodes:
        s, e, p = stack.pop()
        i = len(labels)
        labels.append(f"n{i}")
        start.append(s)
        end.append(e)
        parent.append(p)
        if e - s >= 2 and rng.random() < 0.8:
            cuts = np.sort(rng.choice(np.arange(s, e + 1), size=rng.integers(1, 4) * 2, replace=True))
            kids = [(int(a), int(b)) for a, b in zip(cuts[::2], cuts[1::2])]
            for a, b in reversed(kids):  # push reversed so children pop in order
                stack.append((a, b, i))
    return Structure(kind="tree", labels=labels, start=start, end=end, parent=parent, source=source)


def brute_force(st: Structure, s: int, e: int) -> int:
    best, best_depth = -1, -1
    depth = np.zeros(st.num_nodes, int)
    for i in range(st.num_nodes):
        depth[i] = 0 if st.parent[i] < 0 else depth[st.parent[i]] + 1
    for i in range(st.num_nodes):
        if st.start[i] <= s and e <= st.end[i] and depth[i] >= best_depth:
            best, best_depth = i, depth[i]
    return best


@pytest.mark.parametrize("seed", range(30))
def test_align_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    st = random_tree(rng)
    # preorder with ordered siblings: the brute-force tie rule (later = deeper) holds
    st.validate()
    cuts = np.sort(rng.integers(0, len(st.source) + 1, size=60))
    offsets = np.stack([cuts[:-1], cuts[1:]], 1)
    al = align(st, offsets, strip=False)
    for t, (s, e) in enumerate(offsets):
        if s == e:
            assert al.node[t] == -1 and al.flags[t] & SPECIAL
        else:
            assert al.node[t] == brute_force(st, s, e), (t, s, e)


def test_rules_on_a_small_program():
    src = "f(x, y)\n"
    #         0 call[0,7) 1 name f[0,1) 2 args[1,7) 3 x[2,3) 4 y[5,6)
    st = Structure(
        kind="tree",
        labels=["call", "f", "args", "x", "y"],
        start=[0, 0, 1, 2, 5],
        end=[7, 1, 7, 3, 6],
        parent=[-1, 0, 0, 2, 2],
        source=src,
    ).validate()
    al = align(st, [(0, 0), (0, 1), (1, 2), (2, 3), (3, 5), (4, 6), (5, 7), (7, 8)])
    assert al.node.tolist() == [-1, 1, 2, 3, 2, 4, 2, -1]
    assert al.flags[0] == SPECIAL
    assert al.flags[4] & WHITESPACE == 0 and al.node[4] == 2  # ", " -> "," -> args
    assert al.node[5] == 4 and al.flags[5] == 0  # " y" stripped to "y"
    assert al.flags[6] & STRADDLE  # "y)" crosses the end of y
    assert al.flags[7] & OUTSIDE  # the trailing newline is outside every node

    coords = {"depth": np.array([0, 1, 1, 2, 2]), "vec": np.arange(10.0).reshape(5, 2)}
    tok = al.take(coords, fill=-1)
    assert tok["depth"].tolist() == [-1, 1, 1, 2, 1, 2, 1, -1]
    assert tok["vec"].shape == (8, 2) and (tok["vec"][0] == -1).all()


def test_whitespace_only_token_flagged():
    src = "a   b"
    st = Structure(kind="tree", labels=["r", "a", "b"], start=[0, 0, 4], end=[5, 1, 5], parent=[-1, 0, 0], source=src)
    al = align(st, [(0, 1), (1, 4), (4, 5)])
    assert al.node.tolist() == [1, 0, 2]
    assert al.flags[1] & WHITESPACE


def test_bad_offsets_name_the_token():
    st = Structure(kind="tree", labels=["r"], start=[0], end=[3], parent=[-1], source="abc", name="snippet.py")
    with pytest.raises(StructureError, match=r"snippet.py at token 1"):
        align(st, [(0, 1), (2, 9)])
    with pytest.raises(StructureError, match="token 0"):
        align(st, [(2, 1)])


def test_deep_chain_alignment_is_not_recursive():
    n = 100_000
    src = "[" * n + "]" * n
    start = np.arange(n)
    end = 2 * n - np.arange(n)
    st = Structure(kind="tree", labels=["array"] * n, start=start, end=end, parent=np.arange(n) - 1, source=src)
    al = align(st, [(n - 1, n + 1), (0, 1), (2 * n - 1, 2 * n)])
    assert al.node.tolist() == [n - 1, 0, 0]


def test_dependency_tree_tokens_take_their_word(shared_data):
    """CoNLL-U spans are words (not nested): every sub-word piece takes the word it lies in."""
    import re

    from structpos.parsers.conllu_tree import parse_conllu

    text = (shared_data / "ud_en_ewt" / "en_ewt-ud-dev.conllu").read_text()
    text = text[: text.index("\n\n", 200_000) + 2]
    for sent in parse_conllu(text):
        offsets = np.array([(m.start(), m.end()) for m in re.finditer(r"\w{1,3}|[^\w\s]", sent.source)]).reshape(-1, 2)
        al = align(sent, offsets)
        for (s, e), n in zip(offsets, al.node):
            covering = np.flatnonzero((sent.start <= s) & (sent.end >= e))
            if covering.size:
                assert n in covering
            else:  # a piece crossing words takes the word under its first character, flagged
                t = int(np.flatnonzero((offsets[:, 0] == s) & (offsets[:, 1] == e))[0])
                if n >= 0:
                    assert sent.start[n] <= s < sent.end[n] and al.flags[t] & STRADDLE
                else:
                    assert al.flags[t] & OUTSIDE


def test_top_level_align_stays_the_function_after_the_submodule_is_imported():
    """``structpos.align`` (in ``__all__``) is the function, although a submodule has that name too."""
    import importlib

    import structpos

    importlib.import_module("structpos.align")  # loading a submodule sets the package attribute of its name
    from structpos import align as top

    assert top is align and structpos.align is align
    s = structpos.parse('{"a": 1}', "json")
    assert structpos.align(s, [[1, 4]]).node.tolist() == [1]
