#!/usr/bin/env python3
"""Writes the fuzz drivers' seed corpus: well-formed files and the bombs
that crashed or stalled the readers before they were bounded (nesting,
fan-out, inflation, amplification). Run from fuzz/: python3 make_corpus.py.
scripts/fuzz runs it; the corpus is not committed."""
import zlib, os

for d in ("pdf", "html", "mime"):
    os.makedirs(f"corpus/{d}", exist_ok=True)

def pdf(objects, trailer_extra=""):
    """A PDF with a correct xref table; objects are numbered from 1."""
    out = b"%PDF-1.4\n"
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects)+1}\n0000000000 65535 f \n".encode()
    for o in offsets:
        out += f"{o:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects)+1} /Root 1 0 R {trailer_extra}>>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out

def stream(dict_body, data):
    return f"<< {dict_body} /Length {len(data)} >>\nstream\n".encode() + data + b"\nendstream"

FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
catalog = b"<< /Type /Catalog /Pages 2 0 R >>"
pages = b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>"

def write(path, data):
    with open(path, "wb") as f:
        f.write(data)

# The 745-byte shape from issue 31: a form XObject whose own resources name itself.
write("corpus/pdf/self_drawing_form.pdf", pdf([
    catalog, pages,
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /X0 5 0 R >> >> /Contents 4 0 R >>",
    stream("", b"/X0 Do"),
    stream("/Type /XObject /Subtype /Form /BBox [0 0 10 10] /Resources << /XObject << /X0 5 0 R >> >>", b"/X0 Do"),
]))

# A page whose Parent is itself (an unbounded walk for inherited resources).
write("corpus/pdf/parent_cycle.pdf", pdf([
    catalog, pages,
    b"<< /Type /Page /Parent 3 0 R /Contents 4 0 R >>",
    stream("", b"BT /F1 12 Tf 72 700 Td (orphan) Tj ET"),
]))

# Forms that fan out: each of 8 levels draws the next 10 times (10^8 runs).
levels = 8
objs = [catalog, pages,
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /L0 5 0 R >> /Font << /F1 6 0 R >> >> /Contents 4 0 R >>",
        stream("", b"/L0 Do")]
# 5..: level forms; 5+levels: the font
names = []
for i in range(levels):
    if i + 1 < levels:
        body = (f"/L{i+1} Do ".encode()) * 10
        res = f"/Resources << /XObject << /L{i+1} {5+i+1 if i+1 < levels else 0} 0 R >> /Font << /F1 {5+levels} 0 R >> >>"
    else:
        body = b"BT /F1 12 Tf 72 700 Td (leaf) Tj ET"
        res = f"/Resources << /Font << /F1 {5+levels} 0 R >> >>"
    objs.append(stream(f"/Type /XObject /Subtype /Form /BBox [0 0 10 10] {res}", body))
objs.append(FONT)
objs[2] = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /L0 5 0 R >> >> /Contents 4 0 R >>"
write("corpus/pdf/fan_out_forms.pdf", pdf(objs))

# An inflation bomb: 300 MiB of spaces inside text, deflated.
big = zlib.compressobj(9)
data = big.compress(b"BT /F1 12 Tf 72 700 Td (") + b"".join(big.compress(b" " * (1 << 20)) for _ in range(300)) + big.compress(b") Tj ET") + big.flush()
write("corpus/pdf/inflation_bomb.pdf", pdf([
    catalog, pages,
    f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>".encode(),
    stream("/Filter /FlateDecode", data),
    FONT,
]))

# Text amplification: one small form holding a long line, drawn 5,000 times.
line = b"BT /F1 12 Tf 72 700 Td (" + b"repeated words " * 600 + b") Tj ET"
write("corpus/pdf/text_amplifier.pdf", pdf([
    catalog, pages,
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /T 5 0 R >> /Font << /F1 6 0 R >> >> /Contents 4 0 R >>",
    stream("/Filter /FlateDecode", zlib.compress(b"/T Do " * 5000)),
    stream("/Type /XObject /Subtype /Form /BBox [0 0 10 10] /Filter /FlateDecode", zlib.compress(line)),
    FONT,
]))

# A plain one-page PDF.
write("corpus/pdf/hello.pdf", pdf([
    catalog, pages,
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
    stream("", b"BT /F1 12 Tf 72 700 Td (We open at 9am) Tj ET"),
    FONT,
]))

# HTML: deep nesting, unclosed formatting elements, a wide table.
write("corpus/html/nested_divs.html", b"<div>" * 20000 + b"deep" + b"</div>" * 20000)
write("corpus/html/unclosed_b.html", b"<b>" * 50000 + b"bold")
write("corpus/html/wide_table.html", b"<table><tr>" + b"<td>c</td>" * 20000 + b"</tr></table>")
write("corpus/html/page.html", b"<html><head><title>T</title><style>p{}</style></head><body><h1>Hours</h1><p>We open at <b>9am</b>.</p><ul><li>a</li></ul><script>x='<p>'</script></body></html>")

# MIME: nested messages, many attachments, a plain message with Authentication-Results.
nested = b"".join(b"Content-Type: message/rfc822\r\n\r\n" for _ in range(10000)) + b"From: a@example.com\r\n\r\nhi\r\n"
write("corpus/mime/nested_messages.eml", nested)
parts = b"".join(b"--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=f%d.bin\r\n\r\nx\r\n" % i for i in range(2000))
write("corpus/mime/many_attachments.eml", b"From: a@example.com\r\nSubject: files\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n" + parts + b"--b--\r\n")
multis = b"".join(b"Content-Type: multipart/mixed; boundary=b%d\r\n\r\n--b%d\r\n" % (i, i) for i in range(10000))
write("corpus/mime/nested_multiparts.eml", b"From: a@example.com\r\n" + multis + b"\r\nhi\r\n")
write("corpus/mime/signed.eml", b"Authentication-Results: mx.parley.test; dkim=pass header.d=example.com; spf=pass smtp.mailfrom=example.com; dmarc=pass header.from=example.com\r\nFrom: Ana <ana@example.com>\r\nTo: help@parley.test\r\nSubject: Hi\r\nMessage-ID: <a@example.com>\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Hello <b>there</b></p>\r\n")
for name in os.listdir("corpus/pdf"):
    print(name, os.path.getsize("corpus/pdf/" + name))
