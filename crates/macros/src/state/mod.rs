//! `#[derive(State)]`: channels, the partial-update type and the `State` implementation of a struct.

pub(crate) mod attrs;
mod state_impl;
mod update;

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{Data, DeriveInput, Fields, Ident, Path, Type, Visibility};

use attrs::{Kind, StateField};

/// Everything the generators need.
pub(crate) struct Input {
    /// The state struct.
    pub(crate) ident: Ident,
    /// Its visibility (given to the update type).
    pub(crate) vis: Visibility,
    /// The update type's name.
    pub(crate) update: Ident,
    /// The path of `weft_graph`.
    pub(crate) krate: Path,
    /// The fields, in order.
    pub(crate) fields: Vec<StateField>,
}

impl Input {
    /// The type a write to `field` carries.
    pub(crate) fn write_type(&self, field: &StateField) -> TokenStream {
        let krate = &self.krate;
        match &field.kind {
            Kind::AddMessages => quote!(::std::vec::Vec<#krate::messages::Message>),
            Kind::Ephemeral(inner) => quote!(#inner),
            _ => {
                let ty: &Type = &field.ty;
                quote!(#ty)
            }
        }
    }
}

pub(crate) fn expand(input: DeriveInput) -> syn::Result<TokenStream> {
    let fields = match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Named(named) => {
                named.named.iter().map(StateField::parse).collect::<syn::Result<Vec<_>>>()?
            }
            Fields::Unnamed(fields) => {
                return Err(syn::Error::new_spanned(
                    fields,
                    "derive(State) needs a struct with named fields (one channel per field), not a tuple struct",
                ));
            }
            Fields::Unit => {
                return Err(syn::Error::new_spanned(
                    &input.ident,
                    "derive(State) needs a struct with named fields (one channel per field), not a unit struct",
                ));
            }
        },
        Data::Enum(data) => {
            return Err(syn::Error::new_spanned(
                data.enum_token,
                "derive(State) needs a struct with named fields; an enum cannot be a state",
            ));
        }
        Data::Union(data) => {
            return Err(syn::Error::new_spanned(
                data.union_token,
                "derive(State) needs a struct with named fields; a union cannot be a state",
            ));
        }
    };
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "derive(State) does not support generic parameters; use concrete field types",
        ));
    }
    let input = Input {
        update: format_ident!("{}Update", input.ident),
        vis: input.vis.clone(),
        krate: attrs::crate_path(&input.attrs)?,
        ident: input.ident,
        fields,
    };
    check_method_names(&input)?;
    let update = update::generate(&input);
    let state = state_impl::generate(&input);
    Ok(quote! {
        #update
        #state
    })
}

/// The builder methods are named after the fields; two that clash would not compile, so say why here.
fn check_method_names(input: &Input) -> syn::Result<()> {
    let mut seen: Vec<(String, &Ident)> = vec![("new".to_owned(), &input.ident)];
    for field in &input.fields {
        let mut names = vec![field.ident.to_string()];
        if field.kind.is_reducer() {
            names.push(format!("overwrite_{}", field.ident));
        }
        for name in names {
            if let Some((_, other)) = seen.iter().find(|(n, _)| *n == name) {
                let what = if name == "new" {
                    format!("field `{}` clashes with the generated `{}::new`", field.ident, input.update)
                } else {
                    format!(
                        "the builder method `{name}` of field `{}` clashes with the one of `{other}`",
                        field.ident
                    )
                };
                return Err(syn::Error::new_spanned(&field.ident, what));
            }
            seen.push((name, &field.ident));
        }
    }
    Ok(())
}
