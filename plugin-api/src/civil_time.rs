//! UTC civil time from Unix time, for the few lines keel prints or sends with a date (session
//! listings, the prompt's `date` variable, taint records). A calendar crate would be a
//! dependency of every plugin for one formula, so the days-to-civil conversion lives here once:
//! 400-year eras of 146 097 days, years starting in March so the leap day ends the year.

/// `(year, month, day)` (proleptic Gregorian, UTC) of a Unix time in seconds.
pub fn utc_civil_date(secs: i64) -> (i64, i64, i64) {
    let days = secs.div_euclid(86_400) + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `YYYY-MM-DD` of a Unix time in seconds.
pub fn utc_date(secs: i64) -> String {
    let (year, month, day) = utc_civil_date(secs);
    format!("{year:04}-{month:02}-{day:02}")
}

/// `YYYY-MM-DDTHH:MM:SSZ` of a Unix time in seconds.
pub fn utc_timestamp(secs: i64) -> String {
    let rem = secs.rem_euclid(86_400);
    format!(
        "{}T{:02}:{:02}:{:02}Z",
        utc_date(secs),
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_across_leap_days_and_eras() {
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_timestamp(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_timestamp(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(utc_date(-86_400), "1969-12-31");
        assert_eq!(utc_date(4_107_542_400), "2100-03-01");
    }
}
