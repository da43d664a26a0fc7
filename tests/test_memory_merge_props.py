"""Properties of the memory merge over generated concurrent edits of the
sample OH-Memory files (issue 12): whatever both writers did, the live file
keeps every observation and relation either side added, its frontmatter is
valid YAML and it never holds conflict markers; and almost every pair of
concurrent edits merges without a conflict copy at all.

Each side makes one to four edits of the kinds memory writers make: a new
observation or relation, an observation rewritten or dropped, a paragraph
appended, a prose line reworded, a task ticked, ``modified`` bumped, a tag
added, ``status``/``sensitivity`` set.  Two writers picking the same prose
line or the same field is what makes a real conflict.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

import yaml
from engine_helpers import SAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st
from ohsync.engine.memory.format import MemoryParseError, parse_memory
from ohsync.engine.merge.choose import merge_versions

MARKER = re.compile(r"^(<{7}|={7}|>{7})( |$)", re.M)


def _samples() -> dict[str, bytes]:
    root = SAMPLES / "OH-Memory"
    out = {}
    for path in sorted(root.rglob("*.md")):
        data = path.read_bytes()
        try:
            parse_memory(data)
        except MemoryParseError:
            continue  # a damaged sample is never rewritten by a merge (tested elsewhere)
        out[path.relative_to(root).as_posix()] = data
    assert len(out) >= 10, "sample library missing"
    return out


SAMPLE_FILES = _samples()


@dataclass
class Side:
    """One writer's version and what it added."""

    data: bytes
    added: list[str]


def _lines(data: bytes) -> tuple[str, list[str], str]:
    text = data.decode("utf-8")
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    eol = "\r\n" if "\r\n" in text else "\n"
    return bom, text[len(bom):].split(eol), eol


def _section_end(lines: list[str], title: str) -> int | None:
    """Index after the last entry line of the ``## title`` section, or None."""
    try:
        start = next(i for i, x in enumerate(lines) if x.strip().lower() == f"## {title}")
    except StopIteration:
        return None
    end = start + 1
    while end < len(lines) and not lines[end].startswith("#"):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return end


def _body_start(lines: list[str]) -> int:
    if lines and lines[0].strip() == "---":
        return next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")) + 1
    return 0


def _set_field(lines: list[str], key: str, value: str) -> None:
    if not lines or lines[0].strip() != "---":
        return
    close = _body_start(lines) - 1
    for i in range(1, close):
        if lines[i].startswith(f"{key}:"):
            lines[i] = f"{key}: {value}"
            return
    lines.insert(close, f"{key}: {value}")


def edit(data: bytes, rng: random.Random, who: str) -> Side:
    """A random concurrent edit of one memory file by writer *who*."""
    bom, lines, eol = _lines(data)
    for n in range(rng.randint(1, 4)):
        tag = f"{who}{n}-{rng.randrange(10**6)}"
        kind = rng.choices(["obs", "rel", "obs_edit", "obs_drop", "para", "reword", "tick", "tags", "field"],
                           weights=[30, 15, 6, 3, 8, 8, 4, 6, 3])[0]
        obs_end, rel_end = _section_end(lines, "observations"), _section_end(lines, "relations")
        body = _body_start(lines)
        prose = [i for i in range(body, len(lines)) if lines[i].strip() and not lines[i].startswith(("#", "- ["))
                 and not lines[i].lstrip().startswith(("- ", "```", "|", ">"))]
        obs = [i for i in range(body, len(lines)) if lines[i].startswith("- [") and lines[i][3:4] not in " x"]
        if kind == "obs":
            line = f"- [note] {tag} 新的观察 #{who}"
            if obs_end is None:
                lines += ["", "## Observations", line]
            else:
                lines.insert(rng.randint(obs_end - 1 if obs else obs_end, obs_end), line)
        elif kind == "rel":
            line = f"- relates_to [[{tag}]]"
            if rel_end is None:
                lines += ["", "## Relations", line]
            else:
                lines.insert(rel_end, line)
        elif kind == "obs_edit" and obs:
            i = rng.choice(obs)
            lines[i] = lines[i].rstrip() + f" ({tag})"
        elif kind == "obs_drop" and obs:
            del lines[rng.choice(obs)]
        elif kind == "para":
            lines += ["", f"{tag} 追加的一段话。"]
        elif kind == "reword" and prose:
            i = rng.choice(prose)
            lines[i] = lines[i] + f" {tag}"
        elif kind == "tick":
            todo = [i for i, x in enumerate(lines) if x.startswith("- [ ] ")]
            if todo:
                i = rng.choice(todo)
                lines[i] = "- [x] " + lines[i][6:]
        elif kind == "tags":
            for i in range(1, _body_start(lines)):
                if lines[i].startswith("tags: [") and lines[i].endswith("]"):
                    lines[i] = lines[i][:-1] + f", {tag}]"
        elif kind == "field":
            key = rng.choice(["status", "sensitivity"])
            _set_field(lines, key, rng.choice(["done", "blocked", "waiting"] if key == "status"
                                              else ["normal", "sensitive", "private"]))
    _set_field(lines, "modified", f"2026-12-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00+08:00")
    out = (bom + eol.join(lines)).encode("utf-8")
    return Side(out, sorted(_entries(out) - _entries(data)))


def _entries(data: bytes) -> set[str]:
    """Every observation and relation line of a memory file."""
    doc = parse_memory(data)
    return {o.line for o in doc.observations} | {r.line for r in doc.relations}


def merged_live(rel: str, base: bytes, ours: Side, theirs: Side) -> tuple[bytes, bool]:
    """(what the live file holds after the merge, whether a conflict copy was needed)."""
    r = merge_versions(rel, base, ours.data, theirs.data)
    if r.clean:
        return r.content, False
    assert r.damaged is None and r.partial is not None, (r.conflicts, r.damaged)
    return r.partial, True


def check_live(rel: str, live: bytes, ours: Side, theirs: Side) -> None:
    doc = parse_memory(live)  # frontmatter valid YAML, or this raises
    if doc.frontmatter is not None:
        text = "".join(line for line in doc.frontmatter.body_lines)
        assert isinstance(yaml.safe_load(text) or {}, dict)
    entries = _entries(live)
    for line in ours.added + theirs.added:
        assert line in entries, f"{rel}: lost {line!r}"
    assert not MARKER.search(live.decode("utf-8"))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(SAMPLE_FILES)), st.randoms(use_true_random=False))
def test_property_live_file_keeps_every_addition_valid_yaml_no_markers(rel: str, rng: random.Random) -> None:
    base = SAMPLE_FILES[rel]
    ours, theirs = edit(base, rng, "ours"), edit(base, rng, "theirs")
    live, _ = merged_live(rel, base, ours, theirs)
    check_live(rel, live, ours, theirs)


def test_auto_merge_rate_of_generated_concurrent_edits() -> None:
    rng = random.Random(12)
    total = clean = 0
    for _ in range(600):
        rel = rng.choice(sorted(SAMPLE_FILES))
        base = SAMPLE_FILES[rel]
        ours, theirs = edit(base, rng, "ours"), edit(base, rng, "theirs")
        live, conflicted = merged_live(rel, base, ours, theirs)
        check_live(rel, live, ours, theirs)
        total += 1
        clean += not conflicted
    rate = clean / total
    print(f"memory auto-merge rate: {clean}/{total} = {rate:.1%}")
    assert rate >= 0.95
