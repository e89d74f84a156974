//! Timestamps: always UTC, microsecond precision on every backend.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A UTC instant with microsecond precision.
///
/// Microseconds are what PostgreSQL keeps, so truncating at creation makes a
/// value read back from either backend equal to the one written. JSON carries
/// RFC 3339 with six fractional digits and `Z`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(OffsetDateTime);

impl Timestamp {
    pub fn now() -> Self {
        Self::from_datetime(OffsetDateTime::now_utc())
    }

    pub fn from_datetime(dt: OffsetDateTime) -> Self {
        let utc = dt.to_offset(time::UtcOffset::UTC);
        let micros = utc.microsecond();
        // Truncation cannot fail: the nanosecond value stays in range.
        let truncated = utc.replace_nanosecond(micros * 1_000).unwrap_or(utc);
        Self(truncated)
    }

    /// Microseconds since the Unix epoch.
    pub fn unix_micros(&self) -> i64 {
        (self.0.unix_timestamp_nanos() / 1_000) as i64
    }

    pub fn from_unix_micros(micros: i64) -> Option<Self> {
        OffsetDateTime::from_unix_timestamp_nanos(micros as i128 * 1_000).ok().map(Self)
    }

    /// Parses RFC 3339 (with `Z` or an offset), converting to UTC.
    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        OffsetDateTime::parse(s, &Rfc3339).ok().map(Self::from_datetime)
    }

    pub fn as_datetime(&self) -> OffsetDateTime {
        self.0
    }

    pub fn plus_seconds(&self, seconds: i64) -> Self {
        Self(self.0 + time::Duration::seconds(seconds))
    }

    /// This time plus `d` (unchanged if that would overflow).
    pub fn plus_duration(&self, d: std::time::Duration) -> Self {
        let d = time::Duration::try_from(d).unwrap_or(time::Duration::MAX);
        Self(self.0.checked_add(d).unwrap_or(self.0))
    }

    /// This time minus `d` (unchanged if that would overflow).
    pub fn minus_duration(&self, d: std::time::Duration) -> Self {
        let d = time::Duration::try_from(d).unwrap_or(time::Duration::MAX);
        Self(self.0.checked_sub(d).unwrap_or(self.0))
    }

    pub fn to_rfc3339(&self) -> String {
        let d = self.0;
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
            d.year(),
            u8::from(d.month()),
            d.day(),
            d.hour(),
            d.minute(),
            d.second(),
            d.microsecond()
        )
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse_rfc3339(&s).ok_or_else(|| serde::de::Error::custom("invalid RFC 3339 timestamp"))
    }
}

impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::DateTime)))
            .examples(["2026-11-22T13:10:21.123456Z"])
            .into()
    }
}
impl utoipa::ToSchema for Timestamp {}

/// SQLite keeps timestamps as INTEGER microseconds (so that comparisons and
/// ordering are numeric); PostgreSQL keeps them as `timestamptz`.
#[cfg(feature = "sqlx")]
mod sql {
    use super::Timestamp;
    use sqlx::encode::IsNull;
    use sqlx::error::BoxDynError;
    use sqlx::{Decode, Encode, Postgres, Sqlite, Type};
    use time::OffsetDateTime;

    impl Type<Sqlite> for Timestamp {
        fn type_info() -> sqlx::sqlite::SqliteTypeInfo {
            <i64 as Type<Sqlite>>::type_info()
        }
        fn compatible(ty: &sqlx::sqlite::SqliteTypeInfo) -> bool {
            <i64 as Type<Sqlite>>::compatible(ty)
        }
    }

    impl Encode<'_, Sqlite> for Timestamp {
        fn encode_by_ref(&self, buf: &mut <Sqlite as sqlx::Database>::ArgumentBuffer) -> Result<IsNull, BoxDynError> {
            <i64 as Encode<Sqlite>>::encode(self.unix_micros(), buf)
        }
    }

    impl<'r> Decode<'r, Sqlite> for Timestamp {
        fn decode(value: <Sqlite as sqlx::Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
            let micros = <i64 as Decode<Sqlite>>::decode(value)?;
            Timestamp::from_unix_micros(micros).ok_or_else(|| "timestamp out of range".into())
        }
    }

    impl Type<Postgres> for Timestamp {
        fn type_info() -> sqlx::postgres::PgTypeInfo {
            <OffsetDateTime as Type<Postgres>>::type_info()
        }
        fn compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
            <OffsetDateTime as Type<Postgres>>::compatible(ty)
        }
    }

    impl sqlx::postgres::PgHasArrayType for Timestamp {
        fn array_type_info() -> sqlx::postgres::PgTypeInfo {
            <OffsetDateTime as sqlx::postgres::PgHasArrayType>::array_type_info()
        }
    }

    impl Encode<'_, Postgres> for Timestamp {
        fn encode_by_ref(&self, buf: &mut <Postgres as sqlx::Database>::ArgumentBuffer) -> Result<IsNull, BoxDynError> {
            <OffsetDateTime as Encode<Postgres>>::encode(self.0, buf)
        }
    }

    impl<'r> Decode<'r, Postgres> for Timestamp {
        fn decode(value: <Postgres as sqlx::Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
            Ok(Timestamp::from_datetime(<OffsetDateTime as Decode<Postgres>>::decode(value)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_as_utc_with_microseconds() {
        let t = Timestamp::parse_rfc3339("2026-11-22T15:10:21.123456789+02:00").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-11-22T13:10:21.123456Z");
        assert_eq!(Timestamp::from_unix_micros(t.unix_micros()), Some(t));
    }

    #[test]
    fn rejects_non_rfc3339() {
        assert!(Timestamp::parse_rfc3339("2026-11-22").is_none());
        assert!(Timestamp::parse_rfc3339("yesterday").is_none());
    }
}
