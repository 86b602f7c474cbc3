//! Human units on the command line and the wire: byte sizes (`256M`, `1.5G`) and durations
//! (`10s`, `1m30s`, `250ms`, Go's `time.Duration` syntax that ForgeVM clients send).

use std::fmt;
use std::time::Duration;

/// Why a size or duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("empty value")]
    Empty,
    #[error("negative values are not allowed: {0:?}")]
    Negative(String),
    #[error("invalid number in {0:?}")]
    Number(String),
    #[error("unknown unit {unit:?} in {input:?}")]
    Unit { input: String, unit: String },
    #[error("value {0:?} is too large")]
    Overflow(String),
}

/// Parses a byte size: a plain number of bytes or a number with a binary suffix
/// (`k`/`K`/`KiB`, `m`/`M`/`MiB`, `g`/`G`/`GiB`, `t`/`T`/`TiB`; a trailing `B` is accepted).
pub fn parse_size(input: &str) -> Result<u64, UnitError> {
    let text = input.trim();
    if text.is_empty() {
        return Err(UnitError::Empty);
    }
    if text.starts_with('-') {
        return Err(UnitError::Negative(input.to_owned()));
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| UnitError::Number(input.to_owned()))?;
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => {
            return Err(UnitError::Unit {
                input: input.to_owned(),
                unit: unit.to_owned(),
            });
        }
    };
    #[expect(
        clippy::cast_precision_loss,
        reason = "multipliers are exact powers of two"
    )]
    let bytes = value * multiplier as f64;
    if !bytes.is_finite() || bytes >= 18_446_744_073_709_551_615.0 {
        return Err(UnitError::Overflow(input.to_owned()));
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "range checked above; fractions of a byte are dropped"
    )]
    Ok(bytes as u64)
}

/// Parses a duration in Go's syntax: a sequence of decimal numbers each with a unit
/// (`ns`, `us`/`µs`, `ms`, `s`, `m`, `h`), such as `300ms`, `1.5h` or `2h45m`. A bare number
/// is taken as seconds, which is what people mean by `--timeout 10`.
pub fn parse_duration(input: &str) -> Result<Duration, UnitError> {
    let text = input.trim();
    if text.is_empty() {
        return Err(UnitError::Empty);
    }
    if text.starts_with('-') {
        return Err(UnitError::Negative(input.to_owned()));
    }
    let text = text.strip_prefix('+').unwrap_or(text);
    if text.chars().all(|c| c.is_ascii_digit() || c == '.') {
        let seconds: f64 = text
            .parse()
            .map_err(|_| UnitError::Number(input.to_owned()))?;
        return Duration::try_from_secs_f64(seconds)
            .map_err(|_| UnitError::Overflow(input.to_owned()));
    }
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| UnitError::Unit {
                input: input.to_owned(),
                unit: String::new(),
            })?;
        if number_end == 0 {
            return Err(UnitError::Number(input.to_owned()));
        }
        let value: f64 = rest[..number_end]
            .parse()
            .map_err(|_| UnitError::Number(input.to_owned()))?;
        let after = &rest[number_end..];
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let unit = &after[..unit_end];
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => {
                return Err(UnitError::Unit {
                    input: input.to_owned(),
                    unit: unit.to_owned(),
                });
            }
        };
        total += value * scale;
        rest = &after[unit_end..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| UnitError::Overflow(input.to_owned()))
}

/// Formats a byte count for people: `512 B`, `1.5 KiB`, `256 MiB`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut unit = 0;
    #[expect(clippy::cast_precision_loss, reason = "display only")]
    let mut value = bytes as f64;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else if (value - value.round()).abs() < 0.05 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A duration printed the way Go's `time.Duration.String()` does (`1.5s`, `850µs`, `1m3.2s`),
/// which ForgeVM clients parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoDuration(pub Duration);

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        if nanos == 0 {
            return f.write_str("0s");
        }
        if nanos < 1_000 {
            return write!(f, "{nanos}ns");
        }
        if nanos < 1_000_000 {
            return write!(f, "{}µs", trim_fraction(nanos, 1_000));
        }
        if nanos < 1_000_000_000 {
            return write!(f, "{}ms", trim_fraction(nanos, 1_000_000));
        }
        let hours = nanos / 3_600_000_000_000;
        let minutes = (nanos / 60_000_000_000) % 60;
        let seconds = nanos % 60_000_000_000;
        if hours > 0 {
            write!(f, "{hours}h{minutes}m")?;
        } else if minutes > 0 {
            write!(f, "{minutes}m")?;
        }
        write!(f, "{}s", trim_fraction(seconds, 1_000_000_000))
    }
}

/// `value / unit` as a decimal with trailing zeros removed (`1500, 1000` → `1.5`).
fn trim_fraction(value: u128, unit: u128) -> String {
    let whole = value / unit;
    let fraction = value % unit;
    if fraction == 0 {
        return whole.to_string();
    }
    let width = unit.ilog10() as usize;
    let digits = format!("{fraction:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn sizes() {
        let cases = [
            ("0", Ok(0)),
            ("4096", Ok(4096)),
            ("256M", Ok(256 << 20)),
            ("256MiB", Ok(256 << 20)),
            ("1.5g", Ok(3 << 29)),
            ("64k", Ok(64 << 10)),
            ("-1M", Err(UnitError::Negative("-1M".into()))),
            ("", Err(UnitError::Empty)),
            (
                "12X",
                Err(UnitError::Unit {
                    input: "12X".into(),
                    unit: "X".into(),
                }),
            ),
            ("M", Err(UnitError::Number("M".into()))),
        ];
        let got: Vec<_> = cases.iter().map(|(input, _)| parse_size(input)).collect();
        let want: Vec<_> = cases.into_iter().map(|(_, want)| want).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn durations() {
        let cases = [
            ("10s", Ok(Duration::from_secs(10))),
            ("10", Ok(Duration::from_secs(10))),
            ("250ms", Ok(Duration::from_millis(250))),
            ("1m30s", Ok(Duration::from_secs(90))),
            ("1.5h", Ok(Duration::from_mins(90))),
            ("2h45m", Ok(Duration::from_mins(165))),
            ("850µs", Ok(Duration::from_micros(850))),
            ("-5m", Err(UnitError::Negative("-5m".into()))),
            (
                "not-a-duration",
                Err(UnitError::Number("not-a-duration".into())),
            ),
            (
                "5 minutes",
                Err(UnitError::Unit {
                    input: "5 minutes".into(),
                    unit: " minutes".into(),
                }),
            ),
        ];
        let got: Vec<_> = cases
            .iter()
            .map(|(input, _)| parse_duration(input))
            .collect();
        let want: Vec<_> = cases.into_iter().map(|(_, want)| want).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn go_duration_display() {
        let got: Vec<String> = [
            Duration::ZERO,
            Duration::from_nanos(12),
            Duration::from_micros(850),
            Duration::from_nanos(1_234_567),
            Duration::from_millis(2500),
            Duration::from_millis(63_200),
            Duration::from_secs(3600 + 120 + 3),
        ]
        .into_iter()
        .map(|d| GoDuration(d).to_string())
        .collect();
        assert_eq!(
            got,
            [
                "0s",
                "12ns",
                "850µs",
                "1.234567ms",
                "2.5s",
                "1m3.2s",
                "1h2m3s"
            ]
        );
    }

    #[test]
    fn sizes_for_people() {
        let got: Vec<String> = [0, 512, 1536, 256 << 20, 3 << 29]
            .into_iter()
            .map(format_size)
            .collect();
        assert_eq!(got, ["0 B", "512 B", "1.5 KiB", "256 MiB", "1.5 GiB"]);
    }
}
