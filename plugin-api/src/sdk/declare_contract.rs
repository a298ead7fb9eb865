//! The `contract!` macro: one declaration of a service gives its [`Service`](super::Service)
//! marker, the provider trait, the dispatch that replaces every hand-written method match, and
//! the typed client.

/// Declares a service contract.
///
/// ```
/// use keel_plugin_api::prelude::*;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// pub struct Add { pub a: i64, pub b: i64 }
///
/// keel_plugin_api::contract! {
///     /// Adds numbers.
///     pub contract Adder = "example.adder", version 2;
///     provider AdderProvider;
///     client AdderClient;
///     /// `a + b`.
///     fn add(Add) -> i64;
///     /// Added in version 2: `a * b`.
///     fn mul(Add) -> i64, since 2;
///     /// Added in version 2, no arguments: the calculator's name.
///     fn name() -> String, since 2;
/// }
///
/// struct Calc;
/// impl AdderProvider for Calc {
///     async fn add(&self, r: Add) -> Result<i64> { Ok(r.a + r.b) }
///     async fn mul(&self, r: Add) -> Result<i64> { Ok(r.a * r.b) }
///     async fn name(&self) -> Result<String> { Ok("calc".into()) }
/// }
///
/// let client: AdderClient = ContractClient::new(ContractHandle::serve::<Adder, _>("calc", Calc), "me").into();
/// let sum = futures::executor::block_on(client.add(Add { a: 2, b: 3 })).unwrap();
/// assert_eq!(sum, 5);
/// assert_eq!(futures::executor::block_on(client.name()).unwrap(), "calc");
/// ```
#[macro_export]
macro_rules! contract {
    (
        $(#[doc = $doc:literal])*
        $vis:vis contract $name:ident = $svc:literal, version $version:literal;
        provider $provider:ident;
        client $client:ident;
        $(
            $(#[doc = $mdoc:literal])*
            fn $method:ident($($req:ty)?) -> $resp:ty $(, since $since:literal)?;
        )*
    ) => {
        $(#[doc = $doc])*
        #[doc = concat!("\n\nService `", $svc, "`, contract version ", stringify!($version),
            ". Providers implement [`", stringify!($provider), "`]; consumers call [`",
            stringify!($client), "`].")]
        #[derive(Debug, Clone, Copy)]
        $vis struct $name;

        impl $crate::sdk::Service for $name {
            const NAME: &'static str = $svc;
            type Handle = $crate::sdk::ContractHandle;
        }

        impl $crate::sdk::Contract for $name {
            const VERSION: u32 = $version;
            const METHODS: &'static [$crate::sdk::MethodSpec] = &[$(
                $crate::sdk::MethodSpec {
                    name: stringify!($method),
                    since: $crate::__contract_since!($($since)?),
                }
            ),*];
            type Client = $client;
        }

        #[doc = concat!("The provider side of [`", stringify!($name), "`].")]
        $vis trait $provider: Send + Sync + 'static {
            $(
                $(#[doc = $mdoc])*
                fn $method(
                    &self,
                    $(request: $req)?
                ) -> impl ::core::future::Future<Output = $crate::sdk::Result<$resp>> + Send;
            )*
        }

        impl<P: $provider> $crate::sdk::Serves<P> for $name {
            fn dispatch(
                provider: ::std::sync::Arc<P>,
                method: &str,
                args: $crate::sdk::Payload,
            ) -> ::core::option::Option<$crate::sdk::BoxedAnswer> {
                match method {
                    $(
                        stringify!($method) => Some(
                            match args.decode::<$crate::__contract_req!($($req)?)>(concat!($svc, " `", stringify!($method), "` request")) {
                                #[allow(unused_variables, reason = "a method without arguments decodes `()` and passes nothing")]
                                Ok(request) => $crate::sdk::__boxed(async move {
                                    <P as $provider>::$method(&provider $(, $crate::__contract_pass!(request, $req))?).await
                                }),
                                Err(e) => ::std::boxed::Box::pin(async move { Err(e) }),
                            },
                        ),
                    )*
                    _ => None,
                }
            }
        }

        #[doc = concat!("A typed client of [`", stringify!($name), "`].")]
        #[derive(Clone, Debug)]
        $vis struct $client($crate::sdk::ContractClient<$name>);

        impl ::core::convert::From<$crate::sdk::ContractClient<$name>> for $client {
            fn from(inner: $crate::sdk::ContractClient<$name>) -> Self {
                $client(inner)
            }
        }

        #[allow(dead_code, reason = "a consumer calls the methods it needs")]
        impl $client {
            /// The untyped view: the provider's name and version.
            pub fn contract(&self) -> &$crate::sdk::ContractClient<$name> {
                &self.0
            }
            $(
                $(#[doc = $mdoc])*
                ///
                /// # Errors
                /// What the provider returns; `UNKNOWN_METHOD` when its version lacks the method.
                pub async fn $method(&self $(, request: $req)?) -> $crate::sdk::Result<$resp> {
                    self.0
                        .__call(
                            stringify!($method),
                            $crate::__contract_since!($($since)?),
                            &$crate::__contract_arg!(request $(, $req)?),
                        )
                        .await
                }
            )*
        }
    };
}

/// A method's request type: `()` for a method declared without arguments (`fn id() -> T`).
#[doc(hidden)]
#[macro_export]
macro_rules! __contract_req {
    () => {
        ()
    };
    ($req:ty) => {
        $req
    };
}

/// Passes the decoded request to a provider method that takes one.
#[doc(hidden)]
#[macro_export]
macro_rules! __contract_pass {
    ($request:ident, $req:ty) => {
        $request
    };
}

/// What a client sends: its argument, or `()` for a method without arguments.
#[doc(hidden)]
#[macro_export]
macro_rules! __contract_arg {
    ($request:ident) => {
        ()
    };
    ($request:ident, $req:ty) => {
        $request
    };
}

/// A method's `since` version (1 when not given).
#[doc(hidden)]
#[macro_export]
macro_rules! __contract_since {
    () => {
        1
    };
    ($since:literal) => {
        $since
    };
}
