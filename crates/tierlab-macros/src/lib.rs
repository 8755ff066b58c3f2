//! `#[params]`: a parameter struct declared once. The contract it implements and the keys
//! of `#[param(...)]` are documented in `tierlab_core::param`, which re-exports the macro.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{format_ident, quote};
use syn::{
    parse_macro_input, Attribute, Expr, Fields, GenericArgument, ItemStruct, LitStr, Meta, Path,
    PathArguments, Type,
};

/// Declare a parameter struct: see `tierlab_core::param`.
#[proc_macro_attribute]
pub fn params(args: TokenStream, input: TokenStream) -> TokenStream {
    let args = Tokens::from(args);
    let item = parse_macro_input!(input as ItemStruct);
    match expand(args, item) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// What a field's `#[param(...)]` says.
#[derive(Default)]
struct FieldDecl {
    default: Option<Option<Expr>>,
    required: bool,
    unit: Option<LitStr>,
    range: Option<Tokens>,
    provenance: Option<Tokens>,
}

fn parse_range(lit: &LitStr) -> syn::Result<Tokens> {
    let s = lit.value();
    let t = s.trim();
    let err = || {
        syn::Error::new(
            lit.span(),
            "range: write `[min, max]`, with `(` or `)` for an open end (`inf` for no bound)",
        )
    };
    let (lo_open, rest) = match t.chars().next() {
        Some('[') => (false, &t[1..]),
        Some('(') => (true, &t[1..]),
        _ => return Err(err()),
    };
    let (hi_open, body) = match rest.chars().last() {
        Some(']') => (false, &rest[..rest.len() - 1]),
        Some(')') => (true, &rest[..rest.len() - 1]),
        _ => return Err(err()),
    };
    let (a, b) = body.split_once(',').ok_or_else(err)?;
    let num = |x: &str| -> syn::Result<f64> {
        let x = x.trim().replace('_', "");
        match x.as_str() {
            "inf" | "+inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            _ => x.parse::<f64>().map_err(|_| err()),
        }
    };
    let (min, max) = (num(a)?, num(b)?);
    if min > max {
        return Err(syn::Error::new(lit.span(), "range: min is above max"));
    }
    let lit = |x: f64| -> Tokens {
        if x == f64::INFINITY {
            quote!(f64::INFINITY)
        } else if x == f64::NEG_INFINITY {
            quote!(f64::NEG_INFINITY)
        } else {
            let l = proc_macro2::Literal::f64_suffixed(x);
            quote!(#l)
        }
    };
    let (min, max) = (lit(min), lit(max));
    Ok(quote!(::tierlab_core::param::Range { min: #min, min_open: #lo_open, max: #max, max_open: #hi_open }))
}

fn parse_field_attr(attr: &Attribute, d: &mut FieldDecl) -> syn::Result<()> {
    let set_prov = |d: &mut FieldDecl, t: Tokens, span: Span| -> syn::Result<()> {
        if d.provenance.is_some() {
            return Err(syn::Error::new(
                span,
                "one provenance only: sourced, calibrated, assumed or setting",
            ));
        }
        d.provenance = Some(t);
        Ok(())
    };
    attr.parse_nested_meta(|meta| {
        let key = meta.path.get_ident().map(|i| i.to_string()).unwrap_or_default();
        let span = meta.path.segments[0].ident.span();
        match key.as_str() {
            "default" => {
                d.default = Some(if meta.input.peek(syn::Token![=]) {
                    Some(meta.value()?.parse::<Expr>()?)
                } else {
                    None
                });
            }
            "required" => d.required = true,
            "unit" => d.unit = Some(meta.value()?.parse()?),
            "range" => {
                let v = meta.value()?;
                if v.peek(LitStr) {
                    d.range = Some(parse_range(&v.parse::<LitStr>()?)?);
                } else {
                    let p: Path = v.parse()?;
                    d.range = Some(quote!(#p));
                }
            }
            "sourced" | "calibrated" | "assumed" => {
                // A string literal (not empty) or a constant's path.
                let v = meta.value()?;
                let text: Tokens = if v.peek(LitStr) {
                    let lit: LitStr = v.parse()?;
                    if lit.value().trim().is_empty() {
                        return Err(syn::Error::new(lit.span(), format!("{key}: say what (not empty)")));
                    }
                    quote!(#lit)
                } else {
                    let p: Path = v.parse()?;
                    quote!(#p)
                };
                let variant = match key.as_str() {
                    "sourced" => quote!(Sourced),
                    "calibrated" => quote!(Calibrated),
                    _ => quote!(Assumed),
                };
                set_prov(d, quote!(::tierlab_core::param::Provenance::#variant(#text)), span)?;
            }
            "setting" => set_prov(d, quote!(::tierlab_core::param::Provenance::Setting), span)?,
            _ => {
                return Err(meta.error(
                    "unknown #[param] key (default, required, unit, range, sourced, calibrated, assumed, setting)",
                ))
            }
        }
        Ok(())
    })
}

/// The last path segment's identifier and its first type argument.
fn last_segment(ty: &Type) -> Option<(String, Option<&Type>)> {
    let Type::Path(p) = ty else { return None };
    let seg = p.path.segments.last()?;
    let arg = match &seg.arguments {
        PathArguments::AngleBracketed(a) => a.args.iter().find_map(|g| match g {
            GenericArgument::Type(t) => Some(t),
            _ => None,
        }),
        _ => None,
    };
    Some((seg.ident.to_string(), arg))
}

/// Whether the type is written as a number (or an Option/Vec/array of numbers).
fn is_numeric(ty: &Type) -> bool {
    const NUM: &[&str] = &[
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize", "f32", "f64",
    ];
    match ty {
        Type::Array(a) => is_numeric(&a.elem),
        Type::Tuple(t) => t.elems.iter().any(is_numeric),
        _ => match last_segment(ty) {
            Some((id, None)) => NUM.contains(&id.as_str()),
            Some((id, Some(inner))) if id == "Option" || id == "Vec" => is_numeric(inner),
            _ => false,
        },
    }
}

fn doc_of(attrs: &[Attribute]) -> String {
    let mut lines = Vec::new();
    for a in attrs {
        if !a.path().is_ident("doc") {
            continue;
        }
        if let Meta::NameValue(nv) = &a.meta {
            if let Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) = &nv.value {
                let v = s.value();
                lines.push(v.strip_prefix(' ').unwrap_or(&v).to_string());
            }
        }
    }
    lines.join("\n").trim().to_string()
}

/// Whether `#[serde(...)]` attributes among `attrs` contain `word` (e.g. `flatten`).
fn serde_has(attrs: &[Attribute], word: &str) -> bool {
    attrs.iter().filter(|a| a.path().is_ident("serde")).any(|a| {
        let mut found = false;
        let _ = a.parse_nested_meta(|m| {
            if m.path.is_ident(word) {
                found = true;
            }
            if m.input.peek(syn::Token![=]) {
                let _: Expr = m.value()?.parse()?;
            }
            Ok(())
        });
        found
    })
}

/// The `rename = "..."` of a field's serde attributes.
fn serde_rename(attrs: &[Attribute]) -> Option<String> {
    let mut out = None;
    for a in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = a.parse_nested_meta(|m| {
            if m.path.is_ident("rename") {
                let s: LitStr = m.value()?.parse()?;
                out = Some(s.value());
            } else if m.input.peek(syn::Token![=]) {
                let _: Expr = m.value()?.parse()?;
            }
            Ok(())
        });
    }
    out
}

/// The last segments of the traits a struct derives.
fn derives(attrs: &[Attribute]) -> Vec<String> {
    let mut out = Vec::new();
    for a in attrs.iter().filter(|a| a.path().is_ident("derive")) {
        let _ = a.parse_nested_meta(|m| {
            if let Some(seg) = m.path.segments.last() {
                out.push(seg.ident.to_string());
            }
            Ok(())
        });
    }
    out
}

fn type_text(ty: &Type) -> String {
    let s = quote!(#ty).to_string();
    s.replace(" < ", "<")
        .replace(" <", "<")
        .replace("< ", "<")
        .replace(" >", ">")
        .replace(" :: ", "::")
        .replace(" ,", ",")
}

fn expand(args: Tokens, mut item: ItemStruct) -> syn::Result<Tokens> {
    if !args.is_empty() {
        return Err(syn::Error::new_spanned(args, "#[params] takes no arguments"));
    }
    if !item.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(&item.generics, "#[params] structs are not generic"));
    }
    if serde_has(&item.attrs, "rename_all") {
        return Err(syn::Error::new_spanned(
            &item.ident,
            "#[params] structs keep their field names (no rename_all)",
        ));
    }
    let name = item.ident.clone();
    let Fields::Named(fields) = &mut item.fields else {
        return Err(syn::Error::new_spanned(&item.ident, "#[params] needs a struct with named fields"));
    };
    let mut default_fns = Vec::new();
    let mut default_inits = Vec::new();
    let mut all_default = true;
    let mut specs = Vec::new();
    for f in fields.named.iter_mut() {
        let ident = f.ident.clone().expect("named field");
        let mut d = FieldDecl::default();
        let mut kept = Vec::new();
        for a in f.attrs.drain(..) {
            if a.path().is_ident("param") {
                parse_field_attr(&a, &mut d)?;
            } else {
                kept.push(a);
            }
        }
        f.attrs = kept;
        let ty = f.ty.clone();
        if serde_has(&f.attrs, "flatten") {
            return Err(syn::Error::new_spanned(
                &ident,
                "#[params]: no #[serde(flatten)] (it disables the refusal of unknown keys); compose with params::With",
            ));
        }
        if d.default.is_some() && d.required {
            return Err(syn::Error::new_spanned(
                &ident,
                "a field is `required` or has a `default`, not both",
            ));
        }
        if d.default.is_none() && !d.required {
            return Err(syn::Error::new_spanned(
                &ident,
                "declare the field's default (`#[param(default = ...)]`, or `default` for Default::default()) or `required`",
            ));
        }
        let numeric = is_numeric(&ty);
        if numeric && d.range.is_none() {
            return Err(syn::Error::new_spanned(
                &ident,
                "a number declares its `range` (e.g. range = \"[0, 1e9]\")",
            ));
        }
        if numeric && d.provenance.is_none() {
            return Err(syn::Error::new_spanned(
                &ident,
                "a number declares its provenance: sourced = \"...\", calibrated = \"...\", assumed = \"...\" or setting",
            ));
        }
        let key = serde_rename(&f.attrs).unwrap_or_else(|| ident.to_string());
        let default_spec = match &d.default {
            Some(expr) => {
                let fname = format_ident!("__param_default_{}", ident);
                let body = match expr {
                    Some(e) => quote!(#e),
                    None => quote!(::core::default::Default::default()),
                };
                default_fns.push(quote! {
                    #[doc(hidden)]
                    #[allow(non_snake_case, clippy::redundant_closure)]
                    pub fn #fname() -> #ty { #body }
                });
                let path = LitStr::new(&format!("{name}::{fname}"), Span::call_site());
                f.attrs.push(syn::parse_quote!(#[serde(default = #path)]));
                default_inits.push(quote!(#ident: #name::#fname()));
                quote!(::tierlab_core::param::Default::Computed(|| ::tierlab_core::param::default_text(&#name::#fname())))
            }
            None => {
                all_default = false;
                quote!(::tierlab_core::param::Default::Required)
            }
        };
        let doc = doc_of(&f.attrs);
        let unit = d.unit.map(|u| quote!(#u)).unwrap_or_else(|| quote!(""));
        let range = d.range.map(|r| quote!(Some(#r))).unwrap_or_else(|| quote!(None));
        let prov = d.provenance.unwrap_or_else(|| quote!(::tierlab_core::param::Provenance::Unstated));
        let rust_type = type_text(&ty);
        specs.push(quote! {
            ::tierlab_core::param::FieldSpec {
                name: #key,
                rust_type: #rust_type,
                doc: #doc,
                unit: #unit,
                range: #range,
                provenance: #prov,
                default: #default_spec,
                shape: <#ty as ::tierlab_core::param::ParamType>::shape,
                flatten: false,
            }
        });
    }
    if !serde_has(&item.attrs, "deny_unknown_fields") {
        item.attrs.insert(0, syn::parse_quote!(#[serde(deny_unknown_fields)]));
    }
    let derived = derives(&item.attrs);
    if all_default && derived.iter().any(|d| d == "Default") {
        return Err(syn::Error::new_spanned(
            &item.ident,
            "#[params] writes Default from the declared defaults: remove derive(Default)",
        ));
    }
    for (trait_name, path) in
        [("Deserialize", quote!(::serde::Deserialize)), ("Serialize", quote!(::serde::Serialize))]
    {
        if !derived.iter().any(|d| d == trait_name) {
            item.attrs.insert(0, syn::parse_quote!(#[derive(#path)]));
        }
    }
    let n = specs.len();
    let default_impl = if all_default {
        quote! {
            impl ::core::default::Default for #name {
                fn default() -> Self { #name { #(#default_inits),* } }
            }
        }
    } else {
        quote!()
    };
    Ok(quote! {
        #item
        impl #name { #(#default_fns)* }
        #default_impl
        impl ::tierlab_core::param::Declared for #name {
            fn fields() -> ::std::vec::Vec<&'static ::tierlab_core::param::FieldSpec> {
                static FIELDS: [::tierlab_core::param::FieldSpec; #n] = [#(#specs),*];
                FIELDS.iter().collect()
            }
        }
        impl ::tierlab_core::param::ParamType for #name {
            fn shape() -> ::tierlab_core::param::Shape {
                ::tierlab_core::param::Shape::Table(<#name as ::tierlab_core::param::Declared>::fields)
            }
        }
    })
}
