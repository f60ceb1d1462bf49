//! `#[derive(Destinations)]`: an enum of a router's destinations, one unit variant per node.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Fields, LitStr, Path};

/// A variant's node name: `#[route(name = "..")]`, `END` for `#[route(end)]`, else the variant's name
/// in snake case.
enum Target {
    Node(String),
    End,
}

pub(crate) fn expand(input: DeriveInput) -> syn::Result<TokenStream> {
    let Data::Enum(data) = &input.data else {
        return Err(syn::Error::new_spanned(&input.ident, "Destinations can only be derived for an enum"));
    };
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "Destinations cannot be derived for a generic enum",
        ));
    }
    let mut krate: Path = crate::krate::default_path(
        "weft-graph",
        syn::parse_quote!(::weft_graph),
        syn::parse_quote!(::weft::graph),
    );
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("route")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                krate = meta.value()?.parse()?;
                Ok(())
            } else {
                Err(meta.error("unknown route attribute on the enum; expected `crate = path`"))
            }
        })?;
    }
    if data.variants.is_empty() {
        return Err(syn::Error::new_spanned(&input.ident, "Destinations needs at least one variant"));
    }
    let mut names = Vec::new();
    let mut arms = Vec::new();
    let mut visits = Vec::new();
    for variant in &data.variants {
        if !matches!(variant.fields, Fields::Unit) {
            return Err(syn::Error::new_spanned(
                variant,
                "each variant of a Destinations enum is one node and carries no data",
            ));
        }
        let mut target = Target::Node(snake_case(&variant.ident.to_string()));
        for attr in variant.attrs.iter().filter(|a| a.path().is_ident("route")) {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("end") {
                    target = Target::End;
                    Ok(())
                } else if meta.path.is_ident("name") {
                    let name: LitStr = meta.value()?.parse()?;
                    if name.value().is_empty() {
                        return Err(syn::Error::new_spanned(name, "a node name cannot be empty"));
                    }
                    target = Target::Node(name.value());
                    Ok(())
                } else {
                    Err(meta.error("unknown route attribute; expected `end` or `name = \"node\"`"))
                }
            })?;
        }
        let ident = &variant.ident;
        let (name, route, borrowed) = match target {
            Target::End => (quote!(#krate::END), quote!(#krate::Route::End), quote!(#krate::RouteRef::End)),
            Target::Node(name) => (
                quote!(#name),
                quote!(#krate::Route::Node(::std::string::ToString::to_string(#name))),
                quote!(#krate::RouteRef::Node(#name)),
            ),
        };
        names.push(name);
        arms.push(quote!(Self::#ident => #route));
        visits.push(quote!(Self::#ident => #borrowed));
    }
    let ident = &input.ident;
    Ok(quote! {
        impl #krate::Destinations for #ident {
            fn destinations() -> &'static [&'static str] {
                &[#(#names),*]
            }
        }

        impl #krate::IntoRoutes for #ident {
            fn into_routes(self) -> #krate::branch::RoutesResult {
                ::std::result::Result::Ok(::std::vec![match self { #(#arms),* }])
            }

            fn visit_routes(
                self,
                visit: &mut dyn ::std::ops::FnMut(#krate::RouteRef<'_>),
            ) -> #krate::branch::VisitResult {
                visit(match self { #(#visits),* });
                ::std::result::Result::Ok(())
            }

            fn destinations() -> ::std::option::Option<&'static [&'static str]> {
                ::std::option::Option::Some(<Self as #krate::Destinations>::destinations())
            }
        }
    })
}

/// `CallTool` → `call_tool`, `HTTPFetch` → `http_fetch`.
fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev = i.checked_sub(1).and_then(|p| chars.get(p));
            let next = chars.get(i + 1);
            let boundary = prev.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit())
                || (prev.is_some_and(|p| p.is_uppercase()) && next.is_some_and(|n| n.is_lowercase()));
            if boundary {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::snake_case;

    #[test]
    fn variant_names_become_snake_case_node_names() {
        assert_eq!(snake_case("CallTool"), "call_tool");
        assert_eq!(snake_case("HTTPFetch"), "http_fetch");
        assert_eq!(snake_case("Agent"), "agent");
        assert_eq!(snake_case("Step2Done"), "step2_done");
    }
}
