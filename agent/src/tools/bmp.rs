//! BMP → PNG, because providers take PNG but not BMP and Pi converts BMP before sending it.
//!
//! Handles uncompressed bitmaps (1, 4, 8 bit palettes; 16, 24, 32 bit, including BI_BITFIELDS
//! masks). The PNG is written with stored (uncompressed) deflate blocks: it only has to be valid,
//! and that keeps the encoder to a few lines without a compression dependency. RLE bitmaps return
//! `None`, which the read tool reports as an image it could not convert.

fn u16_le(data: &[u8], offset: usize) -> Option<u32> {
    let bytes = data.get(offset..offset + 2)?;
    Some(u32::from(bytes[0]) | (u32::from(bytes[1]) << 8))
}

fn u32_le(data: &[u8], offset: usize) -> Option<u32> {
    let bytes = data.get(offset..offset + 4)?;
    Some(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// Extracts an 8-bit channel from a pixel with a bit mask.
fn channel(pixel: u32, mask: u32) -> u8 {
    if mask == 0 {
        return 0;
    }
    let shift = mask.trailing_zeros();
    let max = mask >> shift;
    let value = (pixel & mask) >> shift;
    ((u64::from(value) * 255 + u64::from(max) / 2) / u64::from(max)) as u8
}

/// Decodes an uncompressed BMP into RGB rows, top to bottom.
fn decode(data: &[u8]) -> Option<(u32, u32, Vec<u8>)> {
    if data.get(..2) != Some(b"BM") {
        return None;
    }
    let pixel_offset = u32_le(data, 10)? as usize;
    let header_size = u32_le(data, 14)?;
    let (width, height, bits, compression, palette_entry) = if header_size == 12 {
        (
            u16_le(data, 18)? as i64,
            u16_le(data, 20)? as i64,
            u16_le(data, 24)?,
            0,
            3usize,
        )
    } else {
        let width = i64::from(u32_le(data, 18)? as i32);
        let height = i64::from(u32_le(data, 22)? as i32);
        (width, height, u16_le(data, 28)?, u32_le(data, 30)?, 4usize)
    };
    let top_down = height < 0;
    let (width, height) = (width.unsigned_abs(), height.unsigned_abs());
    // Refuse absurd sizes before allocating (a corrupt header must not exhaust memory).
    if width == 0 || height == 0 || width.checked_mul(height)? > 50_000_000 {
        return None;
    }
    let (width, height) = (u32::try_from(width).ok()?, u32::try_from(height).ok()?);
    let masks = match (compression, bits) {
        (0, 16) => (0x7c00, 0x03e0, 0x001f),
        (0, 32) => (0x00ff_0000, 0x0000_ff00, 0x0000_00ff),
        (3, 16 | 32) => {
            // Masks follow a 40-byte header; larger headers carry them inside.
            (u32_le(data, 54)?, u32_le(data, 58)?, u32_le(data, 62)?)
        }
        (0, 1 | 4 | 8 | 24) => (0, 0, 0),
        _ => return None,
    };
    let palette_start = 14 + header_size as usize;
    let palette: Vec<[u8; 3]> = if bits <= 8 {
        let count = 1usize << bits;
        (0..count)
            .map(|i| {
                let at = palette_start + i * palette_entry;
                match data.get(at..at + 3) {
                    Some(bgr) => [bgr[2], bgr[1], bgr[0]],
                    None => [0, 0, 0],
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let stride = (u64::from(bits) * u64::from(width)).div_ceil(32) as usize * 4;
    // The pixel rows must be in the file before anything is allocated for them.
    let pixel_bytes = stride.checked_mul(height as usize)?;
    if pixel_offset.checked_add(pixel_bytes)? > data.len() {
        return None;
    }
    let mut rgb = Vec::with_capacity(width as usize * height as usize * 3);
    for y in 0..height as usize {
        let source_row = if top_down { y } else { height as usize - 1 - y };
        let row_start = pixel_offset.checked_add(source_row.checked_mul(stride)?)?;
        let row = data.get(row_start..row_start.checked_add(stride)?)?;
        for x in 0..width as usize {
            let pixel = match bits {
                1 | 4 | 8 => {
                    let bit = x * bits as usize;
                    let byte = row[bit / 8];
                    let shift = 8 - bits as usize - bit % 8;
                    let index = (byte >> shift) & ((1u16 << bits) - 1) as u8;
                    palette.get(index as usize).copied().unwrap_or([0, 0, 0])
                }
                16 => {
                    let value = u32::from(row[x * 2]) | (u32::from(row[x * 2 + 1]) << 8);
                    [
                        channel(value, masks.0),
                        channel(value, masks.1),
                        channel(value, masks.2),
                    ]
                }
                24 => [row[x * 3 + 2], row[x * 3 + 1], row[x * 3]],
                _ => {
                    let b = &row[x * 4..x * 4 + 4];
                    let value = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    [
                        channel(value, masks.0),
                        channel(value, masks.1),
                        channel(value, masks.2),
                    ]
                }
            };
            rgb.extend_from_slice(&pixel);
        }
    }
    Some((width, height, rgb))
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn adler32(bytes: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in bytes.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    (b << 16) | a
}

fn push_chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    png.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = png.len();
    png.extend_from_slice(kind);
    png.extend_from_slice(data);
    let crc = crc32(&png[start..]);
    png.extend_from_slice(&crc.to_be_bytes());
}

/// An RGB image as a PNG file.
fn encode_png(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
    let row_bytes = width as usize * 3;
    let mut raw = Vec::with_capacity((row_bytes + 1) * height as usize);
    for row in rgb.chunks(row_bytes) {
        raw.push(0); // filter: none
        raw.extend_from_slice(row);
    }
    let mut zlib = vec![0x78, 0x01];
    let mut blocks = raw.chunks(65_535).peekable();
    if blocks.peek().is_none() {
        zlib.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        zlib.push(u8::from(blocks.peek().is_none()));
        let len = block.len() as u16;
        zlib.extend_from_slice(&len.to_le_bytes());
        zlib.extend_from_slice(&(!len).to_le_bytes());
        zlib.extend_from_slice(block);
    }
    zlib.extend_from_slice(&adler32(&raw).to_be_bytes());
    let mut header = Vec::with_capacity(13);
    header.extend_from_slice(&width.to_be_bytes());
    header.extend_from_slice(&height.to_be_bytes());
    header.extend_from_slice(&[8, 2, 0, 0, 0]);
    let mut png = vec![0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
    push_chunk(&mut png, b"IHDR", &header);
    push_chunk(&mut png, b"IDAT", &zlib);
    push_chunk(&mut png, b"IEND", &[]);
    png
}

/// The PNG for an uncompressed BMP, or `None` when it cannot be decoded.
pub(crate) fn bmp_to_png(data: &[u8]) -> Option<Vec<u8>> {
    let (width, height, rgb) = decode(data)?;
    Some(encode_png(width, height, &rgb))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A 2x2 24-bit bottom-up BMP: red, green / blue, white.
    pub(crate) fn tiny_bmp() -> Vec<u8> {
        let mut bmp = Vec::new();
        let pixels: [[u8; 8]; 2] = [
            // bottom row first: blue, white, then 2 bytes of padding
            [255, 0, 0, 255, 255, 255, 0, 0],
            // top row: red, green
            [0, 0, 255, 0, 255, 0, 0, 0],
        ];
        let size = 54 + 16;
        bmp.extend_from_slice(b"BM");
        bmp.extend_from_slice(&(size as u32).to_le_bytes());
        bmp.extend_from_slice(&[0; 4]);
        bmp.extend_from_slice(&54u32.to_le_bytes());
        bmp.extend_from_slice(&40u32.to_le_bytes());
        bmp.extend_from_slice(&2i32.to_le_bytes());
        bmp.extend_from_slice(&2i32.to_le_bytes());
        bmp.extend_from_slice(&1u16.to_le_bytes());
        bmp.extend_from_slice(&24u16.to_le_bytes());
        bmp.extend_from_slice(&[0; 24]);
        for row in pixels {
            bmp.extend_from_slice(&row);
        }
        bmp
    }

    #[test]
    fn decodes_bottom_up_24_bit() {
        let (w, h, rgb) = decode(&tiny_bmp()).unwrap();
        assert_eq!((w, h), (2, 2));
        assert_eq!(rgb, vec![255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255]);
    }

    #[test]
    fn png_has_valid_structure() {
        let png = bmp_to_png(&tiny_bmp()).unwrap();
        assert_eq!(
            crate::tools::image::detect_image_mime_type(&png),
            Some("image/png")
        );
        assert!(png.ends_with(&[0xae, 0x42, 0x60, 0x82]), "IEND crc");
        assert_eq!(crc32(b"IEND"), 0xae42_6082);
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
    }

    #[test]
    fn truncated_bmp_is_rejected() {
        let bmp = tiny_bmp();
        assert_eq!(bmp_to_png(&bmp[..60]), None);
    }
}
