//! Tests of tierlab_core::page.

use tierlab_core::page::*;

#[test]
fn sizes_and_shifts() {
    let want = [(12, 4 << 10), (16, 64 << 10), (21, 2 << 20), (30, 1 << 30)];
    for (p, (shift, bytes)) in PageSize::ALL.into_iter().zip(want) {
        assert_eq!(p.shift(), shift, "{p}");
        assert_eq!(p.bytes(), bytes, "{p}");
        assert_eq!(PageSize::from_bytes(bytes), Some(p));
        assert_eq!(p.base_pages() * PAGE_SIZE, bytes);
    }
    assert_eq!(PageSize::from_bytes(8192), None);
    assert_eq!((PAGE_SIZE, PAGE_SHIFT), (4096, 12));
    assert_eq!((PAGE_64K_SIZE, PAGE_64K_SHIFT), (65536, 16));
    assert_eq!((HUGE_SIZE, HUGE_SHIFT), (2 << 20, 21));
    assert_eq!((HUGE_1G_SIZE, HUGE_1G_SHIFT), (1 << 30, 30));
    assert!(PageSize::Base4K < PageSize::Knc64K && PageSize::Huge2M < PageSize::Huge1G);
    assert_eq!(PageSize::default(), PageSize::Base4K);
    let levels: Vec<u8> = PageSize::ALL.iter().map(|p| p.leaf_level()).collect();
    assert_eq!(levels, vec![1, 1, 2, 3]);
}

#[test]
fn names_parse_and_serialize() {
    for p in PageSize::ALL {
        assert_eq!(p.name().parse::<PageSize>(), Ok(p));
        assert_eq!(p.to_string(), p.name());
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, format!("\"{}\"", p.name()));
        assert_eq!(serde_json::from_str::<PageSize>(&json).unwrap(), p);
    }
    let e = "2M".parse::<PageSize>().unwrap_err();
    assert_eq!(e.to_string(), "page size \"2M\": expected one of 4KiB, 64KiB, 2MiB, 1GiB");
    assert!(serde_json::from_str::<PageSize>("\"4kib\"").is_err());
}

#[test]
fn address_arithmetic() {
    let a = 0x7f12_3456_789a_u64;
    assert_eq!(PageSize::Base4K.base(a), 0x7f12_3456_7000);
    assert_eq!(PageSize::Base4K.number(a), 0x0007_f123_4567);
    assert_eq!(PageSize::Base4K.offset(a), 0x89a);
    assert_eq!(PageSize::Knc64K.base(a), 0x7f12_3456_0000);
    assert_eq!(PageSize::Huge2M.base(a), 0x7f12_3440_0000);
    assert_eq!(PageSize::Huge1G.base(a), 0x7f12_0000_0000);
    for p in PageSize::ALL {
        assert_eq!(p.addr_of(p.number(a)), Some(p.base(a)));
        assert_eq!(p.base(a) + p.offset(a), a);
        assert!(p.is_aligned(p.base(a)));
        assert_eq!(p.align_up(p.base(a)), Some(p.base(a)));
        assert_eq!(p.align_up(p.base(a) + 1), Some(p.base(a) + p.bytes()));
        assert_eq!(p.align_up(u64::MAX), None);
        assert_eq!(p.addr_of(u64::MAX), None);
        assert_eq!(p.pages_for(0), 0);
        assert_eq!(p.pages_for(1), 1);
        assert_eq!(p.pages_for(p.bytes() + 1), 2);
        assert_eq!(page_base(a, p.bytes()), p.base(a));
        assert_eq!(page_number(a, p.bytes()), p.number(a));
        assert_eq!(page_offset(a, p.bytes()), p.offset(a));
    }
    assert_eq!(page_base(a, 16 << 10), 0x7f12_3456_4000);
    assert_eq!(page_number(u64::MAX, 1), u64::MAX);
}
