//! Colours of the chat client: dark or light (`--theme`, `SNOWPEA_THEME`), and none at all
//! with `NO_COLOR` (https://no-color.org: only bold/italic/reverse are used then).

use ratatui::style::{Color, Modifier, Style};

use super::state::ThemeKind;

/// The styles the view uses.
#[derive(Debug, Clone, Copy)]
pub struct Theme {
    /// Light or dark.
    pub kind: ThemeKind,
    /// `NO_COLOR`.
    pub no_color: bool,
}

impl Theme {
    /// The theme for `kind`, without colours when `no_color`.
    pub fn new(kind: ThemeKind, no_color: bool) -> Theme {
        Theme { kind, no_color }
    }

    fn fg(&self, dark: Color, light: Color) -> Style {
        if self.no_color {
            return Style::default();
        }
        Style::default().fg(match self.kind {
            ThemeKind::Dark => dark,
            ThemeKind::Light => light,
        })
    }

    /// Plain text.
    pub fn text(&self) -> Style {
        Style::default()
    }

    /// Secondary text.
    pub fn dim(&self) -> Style {
        if self.no_color {
            return Style::default().add_modifier(Modifier::DIM);
        }
        self.fg(Color::DarkGray, Color::Gray)
    }

    /// The user's prompts.
    pub fn user(&self) -> Style {
        self.fg(Color::Cyan, Color::Blue)
            .add_modifier(Modifier::BOLD)
    }

    /// Headings.
    pub fn heading(&self) -> Style {
        self.fg(Color::Magenta, Color::Magenta)
            .add_modifier(Modifier::BOLD)
    }

    /// Inline code.
    pub fn code(&self) -> Style {
        self.fg(Color::Yellow, Color::Red)
    }

    /// Links.
    pub fn link(&self) -> Style {
        self.fg(Color::Blue, Color::Blue)
            .add_modifier(Modifier::UNDERLINED)
    }

    /// Success marks.
    pub fn ok(&self) -> Style {
        self.fg(Color::Green, Color::Green)
    }

    /// Warnings.
    pub fn warn(&self) -> Style {
        self.fg(Color::Yellow, Color::Rgb(160, 100, 0))
            .add_modifier(if self.no_color {
                Modifier::BOLD
            } else {
                Modifier::empty()
            })
    }

    /// Errors.
    pub fn error(&self) -> Style {
        self.fg(Color::Red, Color::Red).add_modifier(Modifier::BOLD)
    }

    /// Added diff lines.
    pub fn added(&self) -> Style {
        self.fg(Color::Green, Color::Rgb(0, 120, 0))
    }

    /// Removed diff lines.
    pub fn removed(&self) -> Style {
        self.fg(Color::Red, Color::Rgb(170, 0, 0))
    }

    /// Borders and the status line.
    pub fn chrome(&self) -> Style {
        self.fg(Color::Gray, Color::DarkGray)
    }

    /// The highlighted row of a list.
    pub fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }

    /// The syntect theme for code blocks; `None` without colours.
    pub fn syntect_theme(&self) -> Option<&'static str> {
        if self.no_color {
            return None;
        }
        Some(match self.kind {
            ThemeKind::Dark => "base16-ocean.dark",
            ThemeKind::Light => "InspiredGitHub",
        })
    }
}
