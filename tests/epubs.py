"""Writes small, valid ePub 3 files for the tests and the documented examples' workspace."""
import zipfile

CONTAINER = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>"""


def chapter(title: str, body: str) -> str:
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><head>'
            f"<title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>")


def write_epub(path, chapters: list[tuple[str, str]], title: str = "A Small Book", spine_order=None,
               encrypted: bool = False) -> None:
    """chapters: (file name, XHTML); spine_order: file names in reading order (default: as given)."""
    names = [name for name, _ in chapters]
    order = spine_order or names
    items = "".join(f'<item id="c{i}" href="text/{n}" media-type="application/xhtml+xml"/>' for i, n in enumerate(names))
    items += '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
    refs = "".join(f'<itemref idref="c{names.index(n)}"/>' for n in order) + '<itemref idref="nav" linear="no"/>'
    opf = (f'<?xml version="1.0"?>\n<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
           f'<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">urn:x-test:1</dc:identifier>'
           f"<dc:title>{title}</dc:title><dc:language>en</dc:language></metadata>"
           f"<manifest>{items}</manifest><spine>{refs}</spine></package>")
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")  # first and stored, as the spec says
        zf.writestr("META-INF/container.xml", CONTAINER, zipfile.ZIP_DEFLATED)
        if encrypted:
            zf.writestr("META-INF/encryption.xml", '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
                        'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:EncryptionMethod '
                        'Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/><enc:CipherData><enc:CipherReference '
                        'URI="OEBPS/text/one.xhtml"/></enc:CipherData></enc:EncryptedData></encryption>')
        zf.writestr("OEBPS/content.opf", opf, zipfile.ZIP_DEFLATED)
        zf.writestr("OEBPS/nav.xhtml", chapter("Contents", "<ol><li>One</li><li>Two</li></ol>"), zipfile.ZIP_DEFLATED)
        for name, xhtml in chapters:
            zf.writestr(f"OEBPS/text/{name}", xhtml, zipfile.ZIP_DEFLATED)


def sample_book(path) -> None:
    write_epub(path, [
        ("one.xhtml", chapter("The First Chapter", "<p>It was a quiet morning in the harbour town, and the boats "
                              "had not yet gone out.</p><ul><li>nets</li><li>ropes</li></ul>")),
        ("two.xhtml", chapter("The Second Chapter", "<p>By noon the wind had turned, and every sail in the bay "
                              "came home before the storm.</p><table><tr><th>Boat</th><th>Catch</th></tr>"
                              "<tr><td>Maria</td><td>40 kg</td></tr></table>")),
    ], title="Harbour Stories")
