//! Strings that look like personal data or credentials (spec `site.put`: "refuses …
//! strings that look like personal data or credentials"). Site memory holds page
//! structure only; it never stores an email address, phone number, card number, API key,
//! JWT or password. The detectors prefer missing an odd case to refusing ordinary
//! selectors and labels: a label "Password" is fine, "password: hunter2" is not.

use std::sync::LazyLock;

use regex::Regex;

/// What a refused string looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    /// An email address.
    Email,
    /// A phone number.
    Phone,
    /// A payment card number (13–19 digits passing the Luhn check).
    Card,
    /// An API key, access token or JWT.
    Token,
    /// A password or secret written as `name: value`.
    Password,
}

impl Finding {
    /// Human wording for the refusal message.
    pub fn describe(self) -> &'static str {
        match self {
            Finding::Email => "an email address",
            Finding::Phone => "a phone number",
            Finding::Card => "a payment card number",
            Finding::Token => "an API key or access token",
            Finding::Password => "a password or secret",
        }
    }
}

static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}").unwrap()
});
static PHONE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^\w])(?:(?:\+\d{1,3}[\s.-]?)?\(?\d{2,4}\)?[\s.-]\d{3,4}[\s.-]\d{4}|\+\d{10,14})(?:$|[^\w])").unwrap()
});
static CARD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d(?:[ -]?\d){12,18}").unwrap());
static TOKENS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}",
        r"\b(?:sk|pk|rk)[-_](?:live|test|proj|ant)?[-_]?[A-Za-z0-9_-]{16,}",
        r"\bgh[pousr]_[A-Za-z0-9]{20,}",
        r"\bgithub_pat_[A-Za-z0-9_]{20,}",
        r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
        r"\bAKIA[0-9A-Z]{16}\b",
        r"\bAIza[0-9A-Za-z_-]{30,}",
        r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{16,}",
        r"\b[0-9a-fA-F]{40,}\b",
    ]
    .iter()
    .map(|p| Regex::new(p).unwrap())
    .collect()
});
static LONG_RUN: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[A-Za-z0-9]{32,}").unwrap());
static PASSWORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:password|passwd|passcode|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret)\s*[:=]\s*\S+").unwrap()
});

/// Luhn checksum over the digits of `s`.
pub fn luhn(digits: &[u8]) -> bool {
    let mut sum = 0u32;
    for (i, d) in digits.iter().rev().enumerate() {
        let mut d = u32::from(*d);
        if i % 2 == 1 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
    }
    sum.is_multiple_of(10)
}

fn has_card(s: &str) -> bool {
    CARD.find_iter(s).any(|m| {
        let digits: Vec<u8> = m
            .as_str()
            .bytes()
            .filter(u8::is_ascii_digit)
            .map(|b| b - b'0')
            .collect();
        // Real card numbers start with 2–6 (Mastercard, Amex, Visa, Discover, …); this
        // keeps millisecond timestamps and order numbers starting with 1 out.
        (13..=19).contains(&digits.len()) && (2..=6).contains(&digits[0]) && luhn(&digits)
    })
}

fn has_token(s: &str) -> bool {
    TOKENS.iter().any(|re| re.is_match(s))
        || LONG_RUN.find_iter(s).any(|m| {
            let t = m.as_str();
            t.bytes().any(|b| b.is_ascii_uppercase())
                && t.bytes().any(|b| b.is_ascii_lowercase())
                && t.bytes().any(|b| b.is_ascii_digit())
        })
}

/// What personal data or credential `s` looks like, if any. `tokens: false` skips the
/// token detectors (for `fingerprint`, which is a structural hash by design).
pub fn scan(s: &str, tokens: bool) -> Option<Finding> {
    if EMAIL.is_match(s) {
        Some(Finding::Email)
    } else if PASSWORD.is_match(s) {
        Some(Finding::Password)
    } else if tokens && has_token(s) {
        Some(Finding::Token)
    } else if has_card(s) {
        Some(Finding::Card)
    } else if PHONE.is_match(s) {
        Some(Finding::Phone)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn personal_data_and_credentials_are_found() {
        let cases = [
            ("contact jane.doe@example.co.uk now", Finding::Email),
            ("call +1 (555) 123-4567", Finding::Phone),
            ("010-1234-5678", Finding::Phone),
            ("+821012345678", Finding::Phone),
            ("card 4111 1111 1111 1111", Finding::Card),
            ("5500-0000-0000-0004", Finding::Card),
            ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", Finding::Token),
            ("sk-proj-abcdefghijklmnop1234", Finding::Token),
            ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", Finding::Token),
            ("AKIAIOSFODNN7EXAMPLE", Finding::Token),
            ("Bearer abcdef0123456789abcdef", Finding::Token),
            ("x9Kq2mPz7LwR4tYv8NbC3dFh6JsG1aQe", Finding::Token),
            ("password: hunter2", Finding::Password),
            ("api_key=abc", Finding::Password),
        ];
        for (s, want) in cases {
            assert_eq!(scan(s, true), Some(want), "{s}");
        }
    }

    #[test]
    fn ordinary_structure_passes() {
        for s in [
            "Password",
            "Sign in with your email",
            "#login-form input[name=email]",
            "button[data-testid=\"checkout-submit\"]",
            "/orders/2024-01-15-123456",
            "/item/1712345678901",
            "a[href^=\"https://example.com/help\"]",
            "how-to-set-up-your-account-in-2024-Guide",
            "Search results for shoes",
            "회원가입 버튼",
        ] {
            assert_eq!(scan(s, true), None, "{s}");
        }
    }

    #[test]
    fn luhn_checks() {
        assert!(luhn(&[4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]));
        assert!(!luhn(&[4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2]));
    }
}
