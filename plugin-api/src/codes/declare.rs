//! The `error_codes!` macro: declares a domain's code enum with its wire spelling, who returns
//! each code, and the retry advice, so the enum, its parser and `docs/errors.md` cannot
//! disagree.

/// Declares a code set.
///
/// ```
/// keel_plugin_api::error_codes! {
///     /// Codes of the example domain.
///     pub enum ExampleCode in "example" {
///         /// The widget is missing.
///         NoWidget = "NO_WIDGET", by "the example plugin", retry Never;
///     }
/// }
/// use keel_plugin_api::codes::ErrorCode;
/// assert_eq!(ExampleCode::NoWidget.as_str(), "NO_WIDGET");
/// assert_eq!(ExampleCode::parse("NO_WIDGET"), Some(ExampleCode::NoWidget));
/// ```
#[macro_export]
macro_rules! error_codes {
    (
        $(#[doc = $set_doc:literal])*
        $vis:vis enum $name:ident in $domain:literal {
            $(
                $(#[doc = $doc:literal])*
                $variant:ident = $code:literal, by $by:literal, retry $retry:ident;
            )*
        }
    ) => {
        $(#[doc = $set_doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $(
                $(#[doc = $doc])*
                #[doc = concat!("\n\nWire code `", $code, "`; returned by ", $by, ".")]
                $variant,
            )*
        }

        impl $name {
            /// Every code of the set, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The set, as `docs/errors.md` renders it.
            pub const SET: $crate::codes::CodeSet = $crate::codes::CodeSet {
                domain: $domain,
                type_name: stringify!($name),
                doc: concat!($($set_doc, "\n"),*),
                codes: &[$(
                    $crate::codes::CodeInfo {
                        code: $code,
                        returned_by: $by,
                        retry: $crate::codes::Retry::$retry,
                        doc: concat!($($doc, "\n"),*),
                    }
                ),*],
            };

            /// The wire spelling.
            pub const fn code(self) -> &'static str {
                match self {
                    $($name::$variant => $code),*
                }
            }

            /// The wire spelling (as [`code`](Self::code)).
            pub const fn as_str(self) -> &'static str {
                self.code()
            }
        }

        impl $crate::__private::serde::Serialize for $name {
            fn serialize<S: $crate::__private::serde::Serializer>(&self, s: S) -> ::core::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.code())
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::__private::serde::Deserializer<'de>>(d: D) -> ::core::result::Result<Self, D::Error> {
                let text = <::std::borrow::Cow<'de, str> as $crate::__private::serde::Deserialize>::deserialize(d)?;
                <$name as $crate::codes::ErrorCode>::parse(&text).ok_or_else(|| {
                    <D::Error as $crate::__private::serde::de::Error>::custom(format!(
                        "unknown {} code `{text}`", $domain
                    ))
                })
            }
        }

        impl $crate::codes::ErrorCode for $name {
            fn as_str(self) -> &'static str {
                self.code()
            }
            fn retry(self) -> $crate::codes::Retry {
                match self {
                    $($name::$variant => $crate::codes::Retry::$retry),*
                }
            }
            fn parse(code: &str) -> Option<Self> {
                match code {
                    $($code => Some($name::$variant),)*
                    _ => None,
                }
            }
        }

        impl $crate::schemars::JsonSchema for $name {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut $crate::schemars::SchemaGenerator) -> $crate::schemars::Schema {
                $crate::schemars::json_schema!({
                    "type": "string",
                    "enum": [$($code),*],
                })
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.code())
            }
        }
    };
}
