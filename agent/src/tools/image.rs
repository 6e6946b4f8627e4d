//! Image detection by magic bytes (Pi's `utils/mime.ts`): the read tool sends JPEG, PNG, GIF,
//! WebP and BMP files as image blocks whatever their extension.

/// How many leading bytes Pi sniffs.
pub(crate) const IMAGE_SNIFF_BYTES: usize = 4100;

const PNG_SIGNATURE: [u8; 8] = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

fn u16_le(buffer: &[u8], offset: usize) -> u32 {
    let byte = |i: usize| u32::from(buffer.get(offset + i).copied().unwrap_or(0));
    byte(0) | (byte(1) << 8)
}

fn u32_le(buffer: &[u8], offset: usize) -> u32 {
    let byte = |i: usize| u32::from(buffer.get(offset + i).copied().unwrap_or(0));
    byte(0) | (byte(1) << 8) | (byte(2) << 16) | (byte(3) << 24)
}

fn u32_be(buffer: &[u8], offset: usize) -> u32 {
    let byte = |i: usize| u32::from(buffer.get(offset + i).copied().unwrap_or(0));
    (byte(0) << 24) | (byte(1) << 16) | (byte(2) << 8) | byte(3)
}

fn has_at(buffer: &[u8], offset: usize, expected: &[u8]) -> bool {
    buffer.get(offset..offset + expected.len()) == Some(expected)
}

fn is_png(buffer: &[u8]) -> bool {
    buffer.len() >= 16 && u32_be(buffer, 8) == 13 && has_at(buffer, 12, b"IHDR")
}

/// An animated PNG has an `acTL` chunk before its first `IDAT`; Pi does not send those.
fn is_animated_png(buffer: &[u8]) -> bool {
    let mut offset = PNG_SIGNATURE.len();
    while offset + 8 <= buffer.len() {
        let length = u32_be(buffer, offset) as usize;
        if has_at(buffer, offset + 4, b"acTL") {
            return true;
        }
        if has_at(buffer, offset + 4, b"IDAT") {
            return false;
        }
        let next = offset.saturating_add(12).saturating_add(length);
        if next <= offset || next > buffer.len() {
            return false;
        }
        offset = next;
    }
    false
}

fn is_bmp(buffer: &[u8]) -> bool {
    if buffer.len() < 26 {
        return false;
    }
    let declared_size = u32_le(buffer, 2);
    let pixel_offset = u64::from(u32_le(buffer, 10));
    let dib_size = u32_le(buffer, 14);
    if declared_size != 0 && declared_size < 26 {
        return false;
    }
    if pixel_offset < 14 + u64::from(dib_size) {
        return false;
    }
    if declared_size != 0 && pixel_offset >= u64::from(declared_size) {
        return false;
    }
    let (planes, bits) = if dib_size == 12 {
        (u16_le(buffer, 22), u16_le(buffer, 24))
    } else if (40..=124).contains(&dib_size) {
        if buffer.len() < 30 {
            return false;
        }
        (u16_le(buffer, 26), u16_le(buffer, 28))
    } else {
        return false;
    };
    planes == 1 && [1, 4, 8, 16, 24, 32].contains(&bits)
}

/// The MIME type of a supported image, from its first bytes.
pub(crate) fn detect_image_mime_type(buffer: &[u8]) -> Option<&'static str> {
    if buffer.starts_with(&[0xff, 0xd8, 0xff]) {
        // JPEG-LS (FF D8 FF F7) is not something providers accept.
        return if buffer.get(3) == Some(&0xf7) {
            None
        } else {
            Some("image/jpeg")
        };
    }
    if buffer.starts_with(&PNG_SIGNATURE) {
        return (is_png(buffer) && !is_animated_png(buffer)).then_some("image/png");
    }
    if buffer.starts_with(b"GIF87a") || buffer.starts_with(b"GIF89a") {
        return Some("image/gif");
    }
    if buffer.starts_with(b"RIFF") && has_at(buffer, 8, b"WEBP") {
        return Some("image/webp");
    }
    if buffer.starts_with(b"BM") && is_bmp(buffer) {
        return Some("image/bmp");
    }
    None
}

/// An image file prepared for a prompt as Pi's `@file` arguments attach it (no resizing:
/// Pi leaves that to the request): BMP becomes PNG, other supported types pass as they are.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptImage {
    /// An image block's `mimeType` and base64 `data`, with Pi's notes (a conversion).
    Attached {
        mime_type: String,
        data: String,
        hints: Vec<&'static str>,
    },
    /// The file is an image that cannot be sent; Pi's note says why.
    Omitted(&'static str),
}

/// `None` when `bytes` are not a supported image (the file is then text).
pub fn prompt_image(bytes: &[u8]) -> Option<PromptImage> {
    use base64::Engine as _;
    let sniff = &bytes[..bytes.len().min(IMAGE_SNIFF_BYTES)];
    let mime_type = detect_image_mime_type(sniff)?;
    let (bytes, mime_type, hints) =
        if mime_type == "image/bmp" {
            match super::bmp::bmp_to_png(bytes) {
                Some(png) => (
                    png,
                    "image/png",
                    vec!["[Image converted from image/bmp to image/png.]"],
                ),
                None => return Some(PromptImage::Omitted(
                    "[Image omitted: could not be converted to a supported inline image format.]",
                )),
            }
        } else {
            (bytes.to_vec(), mime_type, Vec::new())
        };
    Some(PromptImage::Attached {
        mime_type: mime_type.to_string(),
        data: base64::engine::general_purpose::STANDARD.encode(&bytes),
        hints,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A valid 1x1 PNG.
    pub(crate) const TINY_PNG: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8,
        0xcf, 0xc0, 0xf0, 0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00,
        0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];

    #[test]
    fn detects_supported_images() {
        assert_eq!(detect_image_mime_type(TINY_PNG), Some("image/png"));
        assert_eq!(
            detect_image_mime_type(&[0xff, 0xd8, 0xff, 0xe0, 0, 0]),
            Some("image/jpeg")
        );
        assert_eq!(detect_image_mime_type(&[0xff, 0xd8, 0xff, 0xf7]), None);
        assert_eq!(detect_image_mime_type(b"GIF89a\x01\x00"), Some("image/gif"));
        assert_eq!(
            detect_image_mime_type(b"RIFF\0\0\0\0WEBPVP8 "),
            Some("image/webp")
        );
        assert_eq!(detect_image_mime_type(b"\x89PNG\r\n\x1a\nnot a png"), None);
        assert_eq!(
            detect_image_mime_type(b"BM plain text that starts like a bitmap"),
            None
        );
        assert_eq!(detect_image_mime_type(b"hello"), None);
    }

    #[test]
    fn animated_png_is_not_an_image() {
        let mut apng = TINY_PNG[..33].to_vec();
        apng.extend_from_slice(&[0, 0, 0, 8]);
        apng.extend_from_slice(b"acTL");
        apng.extend_from_slice(&[0; 12]);
        assert_eq!(detect_image_mime_type(&apng), None);
    }
}
