//! Images clients upload: what counts as an image (by its bytes, never by its name or declared
//! type), and how large an upload may be. The images of OpenAI's `images.edit` and the native
//! `POST /api/v1/uploads` follow the same rules.

/// Most bytes of one upload, and of the images of one edit together.
pub const MAX_UPLOAD_BYTES: usize = 20 << 20;

/// An image format clients may upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// PNG.
    Png,
    /// JPEG.
    Jpeg,
    /// WebP.
    Webp,
    /// GIF.
    Gif,
}

impl ImageFormat {
    /// The format of an image, from its first bytes; `None` for anything else.
    #[must_use]
    pub fn sniff(bytes: &[u8]) -> Option<Self> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(Self::Png)
        } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(Self::Jpeg)
        } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
            Some(Self::Webp)
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Some(Self::Gif)
        } else {
            None
        }
    }

    /// Its media type, e.g. `image/png`.
    #[must_use]
    pub fn media_type(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
            Self::Webp => "image/webp",
            Self::Gif => "image/gif",
        }
    }

    /// Its usual file extension, e.g. `png`.
    #[must_use]
    pub fn extension(self) -> &'static str {
        match self {
            Self::Png => "png",
            Self::Jpeg => "jpg",
            Self::Webp => "webp",
            Self::Gif => "gif",
        }
    }

    /// The format of [`ImageFormat::extension`].
    #[must_use]
    pub fn from_extension(extension: &str) -> Option<Self> {
        [Self::Png, Self::Jpeg, Self::Webp, Self::Gif].into_iter().find(|format| format.extension() == extension)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_known_by_their_bytes() {
        let webp = [b"RIFF".as_slice(), &[0, 0, 0, 0], b"WEBPVP8 "].concat();
        for (bytes, expected) in [
            (b"\x89PNG\r\n\x1a\n\0\0".as_slice(), Some(ImageFormat::Png)),
            (&[0xFF, 0xD8, 0xFF, 0xE0], Some(ImageFormat::Jpeg)),
            (&webp, Some(ImageFormat::Webp)),
            (b"GIF89a..", Some(ImageFormat::Gif)),
            (b"<svg xmlns=", None),
            (b"RIFF\0\0\0\0WAVE", None),
            (b"", None),
        ] {
            assert_eq!(ImageFormat::sniff(bytes), expected, "{bytes:?}");
        }
    }

    #[test]
    fn extensions_name_their_format_both_ways() {
        for format in [ImageFormat::Png, ImageFormat::Jpeg, ImageFormat::Webp, ImageFormat::Gif] {
            assert_eq!(ImageFormat::from_extension(format.extension()), Some(format));
        }
        assert_eq!(ImageFormat::from_extension("svg"), None);
    }
}
