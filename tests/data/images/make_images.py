#!/usr/bin/python3
"""Writes the small images tests/vision/image_decode_test.cc decodes.

Pixel (x, y) of every lossless image follows a formula the test repeats,
so the test checks real values without a second decoder. Run from this
directory; the outputs are committed (a few KB), PIL is needed only here.
"""
import struct
import zlib

from PIL import Image

W, H = 23, 17  # odd sizes catch stride mistakes


def rgb(x, y):
    return ((x * 11 + y * 3) & 255, (x * 5 + y * 17) & 255, (x * 29 + y * 7) & 255)


def grey(x, y):
    return (x * 7 + y * 13) & 255


def grey16(x, y):
    return (x * 2851 + y * 977) & 0xFFFF


img = Image.new("RGB", (W, H))
img.putdata([rgb(x, y) for y in range(H) for x in range(W)])
img.save("rgb.png")
img.save("rgb.bmp")
img.save("rgb.tga")
img.save("baseline.jpg", quality=92)
img.save("progressive.jpg", quality=92, progressive=True)
img.save("rgb.ppm")
img.save("rgb.tiff")
# Palette and GIF: an image with few colours so the palette is exact.
pal = Image.new("P", (W, H))
pal.putpalette([v for i in range(256) for v in ((i * 3) & 255, (i * 5) & 255, (i * 7) & 255)])
pal.putdata([(x + y) % 16 for y in range(H) for x in range(W)])
pal.save("palette.png")
frame2 = pal.copy()
frame2.putdata([15 - (x + y) % 16 for y in range(H) for x in range(W)])
pal.save("anim.gif", save_all=True, append_images=[frame2], duration=100, loop=0)

g = Image.new("L", (W, H))
g.putdata([grey(x, y) for y in range(H) for x in range(W)])
g.save("grey.png")

rgba = Image.new("RGBA", (W, H))
# Alpha varies, including fully transparent pixels that keep their colour.
rgba.putdata([rgb(x, y) + ((x * 40) & 255,) for y in range(H) for x in range(W)])
rgba.save("rgba.png")

g16 = Image.new("I;16", (W, H))
g16.putdata([grey16(x, y) for y in range(H) for x in range(W)])
g16.save("grey16.png")


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(
        ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


# Valid headers claiming 10000 x 10000 pixels (over the 64 Mi limit, under
# stb's own header limits) and 100000 x 100000 (stb's header parse refuses
# it itself), each with one tiny IDAT: refused from the header, never decoded.
for name, side in (("huge_header.png", 10000), ("huger_header.png", 100000)):
    ihdr = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    with open(name, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) +
                png_chunk(b"IDAT", zlib.compress(b"\x00" * 8)) + png_chunk(b"IEND", b""))

# Width 0.
ihdr0 = struct.pack(">IIBBBBB", 0, 5, 8, 2, 0, 0, 0)
with open("zero_width.png", "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr0) + png_chunk(b"IEND", b""))

data = open("rgb.png", "rb").read()
open("truncated.png", "wb").write(data[: len(data) // 2])
jpg = open("baseline.jpg", "rb").read()
open("truncated.jpg", "wb").write(jpg[:40])
open("not_an_image.txt", "w").write("this is not an image\n")
open("empty.png", "wb").write(b"")
