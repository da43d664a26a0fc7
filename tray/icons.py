"""Tray icons drawn with Pillow, one per state, any size from 16 to 64 px.

Each state is a coloured disc with a white glyph (tick, sync arrows, pause
bars, cloud with a slash, padlock, "!", stop square, dots, a warning
triangle for ``attention``); "not running" is a
grey power symbol without a disc.  Discs carry a darker rim so they read on
light panels, and mid-tone colours so they read on dark ones.  Conflicts add
an orange badge at the top right, cut out of the disc with a transparent gap.
Shapes are drawn at 4x and downsampled, which keeps 16 px icons crisp.
"""

from __future__ import annotations

import functools
import math

from PIL import Image, ImageDraw

from .menu_model import ICON_STATES, NOT_RUNNING

__all__ = ["COLORS", "BADGE_COLOR", "draw_icon", "icon_for"]

_SCALE = 4  # supersampling factor

#: Disc colour per state (RGB).
COLORS: dict[str, tuple[int, int, int]] = {
    "idle": (46, 160, 67),            # green
    "syncing": (31, 111, 235),        # blue
    "attention": (166, 120, 0),       # amber: syncs, but something needs the person
    "starting": (84, 110, 142),       # blue-grey
    "paused": (110, 118, 129),        # slate
    "offline": (87, 96, 106),         # dark slate
    "auth_required": (219, 109, 0),   # orange-brown
    "stopped": (207, 34, 46),         # red
    "error": (207, 34, 46),           # red
    NOT_RUNNING: (140, 140, 140),     # grey glyph, no disc
}
BADGE_COLOR = (255, 140, 0)
_WHITE = (255, 255, 255, 255)


def _rgba(rgb: tuple[int, int, int], alpha: int = 255) -> tuple[int, int, int, int]:
    return (*rgb, alpha)


def _darker(rgb: tuple[int, int, int], factor: float = 0.62) -> tuple[int, int, int, int]:
    return (int(rgb[0] * factor), int(rgb[1] * factor), int(rgb[2] * factor), 255)


@functools.lru_cache(maxsize=128)
def draw_icon(state: str, size: int = 64, *, badge: bool = False) -> Image.Image:
    """The icon for ``state`` (one of :data:`~ohsync.tray.menu_model.ICON_STATES`).

    :param size: edge in pixels (16 to 256).
    :param badge: add the conflict badge.
    :returns: an RGBA image, shared between callers (cached): do not mutate it.
    :raises ValueError: unknown state or size out of range.
    """
    if state not in ICON_STATES:
        raise ValueError(f"unknown tray state {state!r}")
    if not 16 <= size <= 256:
        raise ValueError(f"icon size {size} out of range 16..256")
    big = size * _SCALE
    img = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    draw = ImageDraw.Draw(img)
    unit = big / 16.0  # drawing grid: 16 units across
    color = COLORS[state]

    if state == NOT_RUNNING:
        _power(draw, unit, _rgba(color))
    else:
        inset = 0.6 * unit
        draw.ellipse((inset, inset, big - inset, big - inset), fill=_rgba(color),
                     outline=_darker(color), width=max(int(0.9 * unit), 1))
        _GLYPHS[state](draw, unit)

    if badge:
        _badge(img, unit)
    return img.resize((size, size), Image.Resampling.LANCZOS)


def icon_for(state: str, conflicts: bool, size: int = 64) -> Image.Image:
    """Shorthand used by the app: ``draw_icon(state, size, badge=conflicts)``."""
    return draw_icon(state, size, badge=conflicts)


# --- glyphs (coordinates in 16ths of the icon) -----------------------------------

def _box(unit: float, x0: float, y0: float, x1: float, y1: float) -> tuple[float, float, float, float]:
    return (x0 * unit, y0 * unit, x1 * unit, y1 * unit)


def _tick(draw: ImageDraw.ImageDraw, unit: float) -> None:
    points = [(4.3 * unit, 8.3 * unit), (6.9 * unit, 10.9 * unit), (11.8 * unit, 5.4 * unit)]
    draw.line(points, fill=_WHITE, width=int(1.9 * unit), joint="curve")


def _arrow_head(draw: ImageDraw.ImageDraw, unit: float, cx: float, cy: float, angle: float) -> None:
    """A filled triangle at (cx, cy) pointing along ``angle`` (radians)."""
    length, half = 2.6 * unit, 1.9 * unit
    dx, dy = math.cos(angle), math.sin(angle)
    tip = (cx + dx * length * 0.6, cy + dy * length * 0.6)
    back = (cx - dx * length * 0.4, cy - dy * length * 0.4)
    draw.polygon([tip, (back[0] - dy * half, back[1] + dx * half),
                  (back[0] + dy * half, back[1] - dx * half)], fill=_WHITE)


def _sync(draw: ImageDraw.ImageDraw, unit: float) -> None:
    radius = 4.2
    box = _box(unit, 8 - radius, 8 - radius, 8 + radius, 8 + radius)
    width = int(1.5 * unit)
    # two arcs (PIL angles: degrees clockwise from 3 o'clock), heads at their ends
    draw.arc(box, 200, 330, fill=_WHITE, width=width)
    draw.arc(box, 20, 150, fill=_WHITE, width=width)
    for end in (330, 150):
        rad = math.radians(end)
        cx, cy = 8 * unit + radius * unit * math.cos(rad), 8 * unit + radius * unit * math.sin(rad)
        _arrow_head(draw, unit, cx, cy, rad + math.pi / 2)


def _pause(draw: ImageDraw.ImageDraw, unit: float) -> None:
    draw.rectangle(_box(unit, 5.2, 4.6, 7.1, 11.4), fill=_WHITE)
    draw.rectangle(_box(unit, 8.9, 4.6, 10.8, 11.4), fill=_WHITE)


def _offline(draw: ImageDraw.ImageDraw, unit: float) -> None:
    # a cloud: three bumps on a flat base, then a slash in the disc colour + white
    draw.ellipse(_box(unit, 3.6, 7.2, 7.4, 11.0), fill=_WHITE)
    draw.ellipse(_box(unit, 5.6, 4.8, 10.4, 9.6), fill=_WHITE)
    draw.ellipse(_box(unit, 8.8, 6.8, 12.4, 10.4), fill=_WHITE)
    draw.rectangle(_box(unit, 5.4, 8.6, 10.6, 11.0), fill=_WHITE)
    draw.line([(3.6 * unit, 3.6 * unit), (12.4 * unit, 12.4 * unit)],
              fill=_rgba(COLORS["offline"]), width=int(2.4 * unit))
    draw.line([(3.9 * unit, 3.9 * unit), (12.1 * unit, 12.1 * unit)], fill=_WHITE, width=int(1.1 * unit))


def _padlock(draw: ImageDraw.ImageDraw, unit: float) -> None:
    draw.arc(_box(unit, 5.6, 3.4, 10.4, 9.4), 180, 360, fill=_WHITE, width=int(1.3 * unit))
    draw.line([(6.25 * unit, 6.4 * unit), (6.25 * unit, 7.6 * unit)], fill=_WHITE, width=int(1.3 * unit))
    draw.line([(9.75 * unit, 6.4 * unit), (9.75 * unit, 7.6 * unit)], fill=_WHITE, width=int(1.3 * unit))
    draw.rounded_rectangle(_box(unit, 4.6, 7.2, 11.4, 12.2), radius=unit, fill=_WHITE)
    draw.ellipse(_box(unit, 7.3, 8.7, 8.7, 10.1), fill=_rgba(COLORS["auth_required"]))


def _exclamation(draw: ImageDraw.ImageDraw, unit: float) -> None:
    draw.rounded_rectangle(_box(unit, 7.0, 3.6, 9.0, 9.4), radius=0.8 * unit, fill=_WHITE)
    draw.ellipse(_box(unit, 6.9, 10.3, 9.1, 12.5), fill=_WHITE)


def _stop(draw: ImageDraw.ImageDraw, unit: float) -> None:
    draw.rectangle(_box(unit, 5.2, 5.2, 10.8, 10.8), fill=_WHITE)


def _dots(draw: ImageDraw.ImageDraw, unit: float) -> None:
    for x in (4.2, 7.0, 9.8):
        draw.ellipse(_box(unit, x, 7.0, x + 2.0, 9.0), fill=_WHITE)


def _warning(draw: ImageDraw.ImageDraw, unit: float) -> None:
    draw.polygon([(8 * unit, 3.0 * unit), (13.0 * unit, 12.2 * unit), (3.0 * unit, 12.2 * unit)], fill=_WHITE)
    inner = _rgba(COLORS["attention"])
    draw.rectangle(_box(unit, 7.35, 6.2, 8.65, 9.6), fill=inner)
    draw.ellipse(_box(unit, 7.3, 10.1, 8.7, 11.5), fill=inner)


def _power(draw: ImageDraw.ImageDraw, unit: float, color: tuple[int, int, int, int]) -> None:
    width = int(1.9 * unit)
    draw.arc(_box(unit, 2.2, 2.6, 13.8, 14.2), 300, 240, fill=color, width=width)
    draw.line([(8 * unit, 1.4 * unit), (8 * unit, 8.0 * unit)], fill=color, width=width)


_GLYPHS = {
    "idle": _tick,
    "syncing": _sync,
    "attention": _warning,
    "starting": _dots,
    "paused": _pause,
    "offline": _offline,
    "auth_required": _padlock,
    "stopped": _stop,
    "error": _exclamation,
}


def _badge(img: Image.Image, unit: float) -> None:
    """An orange dot at the top right, separated from the disc by a transparent gap."""
    cx, cy, radius, gap = 12.3 * unit, 3.7 * unit, 3.4 * unit, 1.1 * unit
    cut = Image.new("L", img.size, 0)
    ImageDraw.Draw(cut).ellipse((cx - radius - gap, cy - radius - gap, cx + radius + gap, cy + radius + gap),
                                fill=255)
    alpha = img.getchannel("A")
    alpha.paste(0, mask=cut)
    img.putalpha(alpha)
    ImageDraw.Draw(img).ellipse((cx - radius, cy - radius, cx + radius, cy + radius),
                                fill=_rgba(BADGE_COLOR), outline=_darker(BADGE_COLOR, 0.75),
                                width=max(int(0.6 * unit), 1))
