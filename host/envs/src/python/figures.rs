//! The figures the driver saved: matplotlib figures shown or left open,
//! and PIL images left as a trailing expression, written as PNG under
//! `<project>/.envhost/figures/`. This module checks what the driver named
//! (only PNG files in that folder are believed: the agent's code shares the
//! driver's interpreter), reads each one's size in pixels from its header,
//! and keeps the latest few for the screen. It must not know how the driver
//! saves them or how the answer is sent.

use std::collections::VecDeque;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Figures the screen lists, latest first.
pub const SHOWN: usize = 3;

/// Where the driver saves figures, inside the project.
const FOLDER: [&str; 2] = [".envhost", "figures"];

/// A saved figure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Figure {
    /// Its absolute path.
    pub path: PathBuf,
    /// Its path relative to the project, as the agent reads it.
    shown: String,
    width: u32,
    height: u32,
}

impl Figure {
    /// The line the response carries for it.
    pub fn sentence(&self) -> String {
        format!("[Figure saved: {} ({})]", self.shown, self.pixels())
    }

    fn pixels(&self) -> String {
        format!("{} × {} pixels", self.width, self.height)
    }
}

/// The latest figures, for the screen.
#[derive(Debug, Default)]
pub struct Figures {
    latest: VecDeque<Figure>,
}

impl Figures {
    /// The figures among `saved` (paths the driver reported) that really
    /// are PNG files in the project's figures folder, in order; the screen
    /// keeps the latest of them.
    pub fn take(&mut self, project: &Path, saved: &[String]) -> Vec<Figure> {
        let folder = FOLDER.iter().fold(project.to_path_buf(), |p, c| p.join(c));
        let found: Vec<Figure> = saved
            .iter()
            .filter_map(|path| figure(project, &folder, Path::new(path)))
            .collect();
        for figure in &found {
            self.latest.push_front(figure.clone());
        }
        self.latest.truncate(SHOWN);
        found
    }

    /// The screen's lines about them, if any were saved.
    pub fn screen_lines(&self) -> Option<String> {
        if self.latest.is_empty() {
            return None;
        }
        let mut text =
            String::from("Figures (latest first; plt.show() and open figures are saved):\n");
        for figure in &self.latest {
            text.push_str(&format!("  {} ({})\n", figure.shown, figure.pixels()));
        }
        Some(text)
    }
}

/// `path` as a figure, if it is a PNG file directly in `folder`.
fn figure(project: &Path, folder: &Path, path: &Path) -> Option<Figure> {
    if path.parent() != Some(folder) || !path.symlink_metadata().ok()?.is_file() {
        return None;
    }
    let (width, height) = png_size(path)?;
    let shown = path.strip_prefix(project).ok()?.to_str()?.to_owned();
    Some(Figure {
        path: path.to_path_buf(),
        shown,
        width,
        height,
    })
}

/// Width and height from a PNG file's header (the signature, then the
/// IHDR chunk: length, type, width, height, big-endian).
pub fn png_size(path: &Path) -> Option<(u32, u32)> {
    let mut header = [0u8; 24];
    let opened = envhost_files::untrusted::open_file(path).ok()?;
    let mut file = opened.file();
    file.read_exact(&mut header).ok()?;
    if &header[..8] != b"\x89PNG\r\n\x1a\n" || &header[12..16] != b"IHDR" {
        return None;
    }
    let number = |at: usize| {
        u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    Some((number(16), number(20)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        bytes.extend(width.to_be_bytes());
        bytes.extend(height.to_be_bytes());
        bytes.extend([8, 6, 0, 0, 0]);
        bytes
    }

    #[test]
    fn only_pngs_in_the_figures_folder_are_believed() {
        let project = tempfile::tempdir().unwrap();
        let folder = project.path().join(".envhost/figures");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("figure-1.png"), png(640, 480)).unwrap();
        std::fs::write(folder.join("not.png"), b"text").unwrap();
        std::fs::write(project.path().join("elsewhere.png"), png(1, 1)).unwrap();
        let saved: Vec<String> = [
            folder.join("figure-1.png"),
            folder.join("not.png"),
            project.path().join("elsewhere.png"),
            folder.join("missing.png"),
        ]
        .iter()
        .map(|p| p.display().to_string())
        .collect();
        let mut figures = Figures::default();
        let found = figures.take(project.path(), &saved);
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].sentence(),
            "[Figure saved: .envhost/figures/figure-1.png (640 × 480 pixels)]"
        );
        assert!(
            figures
                .screen_lines()
                .unwrap()
                .contains("figure-1.png (640 × 480 pixels)")
        );
    }
}
