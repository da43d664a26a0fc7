"""Tray icons: one distinct, legible picture per state and size, plus the conflict badge."""

from __future__ import annotations

import itertools

import pytest
from PIL import Image, ImageChops, ImageStat

from ohsync.tray import icons
from ohsync.tray.menu_model import ICON_STATES, NOT_RUNNING, icon_state

SIZES = (16, 22, 24, 32, 48, 64)


def pixels(img: Image.Image) -> list[tuple[int, ...]]:
    """RGBA pixels (``getdata`` is deprecated in Pillow 13)."""
    data, bands = img.tobytes(), len(img.getbands())
    return [tuple(data[i:i + bands]) for i in range(0, len(data), bands)]


def on(background: tuple[int, int, int], img: Image.Image) -> Image.Image:
    base = Image.new("RGBA", img.size, (*background, 255))
    base.alpha_composite(img)
    return base.convert("RGB")


@pytest.mark.parametrize("state", ICON_STATES)
@pytest.mark.parametrize("size", SIZES)
def test_every_state_draws_at_every_size(state: str, size: int) -> None:
    img = icons.draw_icon(state, size)
    assert img.mode == "RGBA" and img.size == (size, size)
    alpha = img.getchannel("A")
    assert alpha.getpixel((0, 0)) == 0 and alpha.getpixel((size - 1, size - 1)) == 0  # round, not a tile
    opaque = sum(1 for a in alpha.tobytes() if a > 200)
    assert opaque > size * size * (0.15 if state == NOT_RUNNING else 0.5)


@pytest.mark.parametrize("state", ICON_STATES)
def test_icons_stand_out_on_light_and_dark_panels(state: str) -> None:
    img = icons.draw_icon(state, 22)
    for background in ((255, 255, 255), (0, 0, 0), (48, 48, 48), (240, 240, 240)):
        diff = ImageChops.difference(on(background, img), Image.new("RGB", img.size, background))
        mask = img.getchannel("A").point(lambda a: 255 if a > 128 else 0)
        mean = sum(ImageStat.Stat(diff, mask=mask).mean) / 3
        assert mean > 45, (state, background, mean)


def test_states_are_told_apart_at_16_px() -> None:
    for a, b in itertools.combinations(ICON_STATES, 2):
        pa, pb = on((128, 128, 128), icons.draw_icon(a, 16)), on((128, 128, 128), icons.draw_icon(b, 16))
        diff = sum(ImageStat.Stat(ImageChops.difference(pa, pb)).mean)
        assert diff > 6, (a, b, diff)


def test_glyphs_are_white_on_the_disc() -> None:
    img = icons.draw_icon("idle", 64).convert("RGBA")
    whites = sum(1 for r, g, b, a in pixels(img) if a > 200 and min(r, g, b) > 230)
    assert whites > 64 * 64 * 0.05


@pytest.mark.parametrize("state", [s for s in ICON_STATES if s != NOT_RUNNING])
@pytest.mark.parametrize("size", (16, 64))
def test_conflict_badge_is_an_orange_dot_top_right(state: str, size: int) -> None:
    plain, badged = icons.draw_icon(state, size), icons.draw_icon(state, size, badge=True)
    quarter = (size // 2, 0, size, size // 2)
    corner = badged.crop(quarter)
    oranges = sum(1 for r, g, b, a in pixels(corner)
                  if a > 200 and r > 220 and 100 < g < 180 and b < 60)
    assert oranges > (size // 2) ** 2 * 0.15
    # the rest of the picture is unchanged
    bottom = (0, size * 3 // 4, size, size)
    assert ImageChops.difference(plain.crop(bottom), badged.crop(bottom)).getbbox() is None


def test_icon_state_maps_status_to_picture_and_badge() -> None:
    assert icon_state({"state": "syncing", "conflicts": 2}) == ("syncing", True)
    assert icon_state({"state": "idle", "conflicts": 0}) == ("idle", False)
    assert icon_state(None) == (NOT_RUNNING, False)
    assert icons.icon_for("idle", True, 32) is icons.draw_icon("idle", 32, badge=True)  # cached


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        icons.draw_icon("sunny", 32)
    with pytest.raises(ValueError):
        icons.draw_icon("idle", 8)
