//! `#[derive(HasMessages)]`: the conversation channel of a custom state, for the prebuilt agents.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Fields};

use crate::state::attrs::{Kind, StateField};

/// The path of `weft_agents` as the calling crate sees it.
fn default_crate_path() -> syn::Path {
    crate::krate::default_path(
        "weft-agents",
        syn::parse_quote!(::weft_agents),
        syn::parse_quote!(::weft::agents),
    )
}

pub(crate) fn expand(input: DeriveInput) -> syn::Result<TokenStream> {
    let mut krate = default_crate_path();
    for attr in input.attrs.iter().filter(|attr| attr.path().is_ident("has_messages")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                krate = meta.value()?.parse()?;
                Ok(())
            } else {
                Err(meta.error("unknown #[has_messages] option; expected crate"))
            }
        })?;
    }
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(&input.ident, "derive(HasMessages) needs a struct"));
    };
    let Fields::Named(named) = &data.fields else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "derive(HasMessages) needs a struct with named fields",
        ));
    };
    let fields = named.named.iter().map(StateField::parse).collect::<syn::Result<Vec<_>>>()?;
    let by_name = fields.iter().find(|field| field.ident == "messages");
    let mut merged = fields.iter().filter(|field| matches!(field.kind, Kind::AddMessages));
    let field = match (by_name, merged.next(), merged.next()) {
        (Some(field), _, _) | (None, Some(field), None) => field,
        (None, Some(_), Some(_)) => {
            return Err(syn::Error::new_spanned(
                &input.ident,
                "derive(HasMessages) found several #[state(add_messages)] fields: name the conversation `messages`",
            ));
        }
        (None, None, _) => {
            return Err(syn::Error::new_spanned(
                &input.ident,
                "derive(HasMessages) needs a `messages` field or one marked #[state(add_messages)]",
            ));
        }
    };
    let ident = &input.ident;
    let field_ident = &field.ident;
    let graph = quote!(#krate::__private::graph);
    Ok(quote! {
        impl #krate::HasMessages for #ident {
            fn messages(&self) -> &[#graph::messages::Message] {
                &self.#field_ident
            }

            fn messages_update(
                messages: ::std::vec::Vec<#graph::messages::Message>,
            ) -> <Self as #graph::State>::Update {
                Self::update().#field_ident(messages)
            }
        }
    })
}
