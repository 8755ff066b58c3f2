//! Page sizes and page arithmetic on virtual addresses.
//!
//! [`PageSize`] names the four page sizes tierlab models:
//!
//! | variant | bytes | name | what it is |
//! |---|---|---|---|
//! | [`PageSize::Base4K`] | 4 KiB | `4KiB` | the x86-64 base page: a PTE (level 1) leaf |
//! | [`PageSize::Knc64K`] | 64 KiB | `64KiB` | Knights Corner's 64 KiB page: 16 consecutive 4 KiB PTEs, 64 KiB aligned, with a hint bit, cached as one TLB entry |
//! | [`PageSize::Huge2M`] | 2 MiB | `2MiB` | a huge page: a PMD (level 2) leaf |
//! | [`PageSize::Huge1G`] | 1 GiB | `1GiB` | a gigantic page: a PUD (level 3) leaf |
//!
//! The names are what scenario files, JSON and the CLI use (serde and [`std::str::FromStr`]
//! both read and write them). The free functions [`page_base`], [`page_number`] and
//! [`page_offset`] take any power-of-two page size in bytes, for callers whose page size comes
//! from data (a recording's `machine.page_size`, a placement plan's `page_size`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Shift of a 4 KiB base page.
pub const PAGE_SHIFT: u32 = PageSize::Base4K.shift();
/// Bytes in a 4 KiB base page.
pub const PAGE_SIZE: u64 = PageSize::Base4K.bytes();
/// Shift of a 64 KiB (Knights Corner) page.
pub const PAGE_64K_SHIFT: u32 = PageSize::Knc64K.shift();
/// Bytes in a 64 KiB (Knights Corner) page.
pub const PAGE_64K_SIZE: u64 = PageSize::Knc64K.bytes();
/// Shift of a 2 MiB huge page.
pub const HUGE_SHIFT: u32 = PageSize::Huge2M.shift();
/// Bytes in a 2 MiB huge page.
pub const HUGE_SIZE: u64 = PageSize::Huge2M.bytes();
/// Shift of a 1 GiB gigantic page.
pub const HUGE_1G_SHIFT: u32 = PageSize::Huge1G.shift();
/// Bytes in a 1 GiB gigantic page.
pub const HUGE_1G_SIZE: u64 = PageSize::Huge1G.bytes();

/// One of the page sizes tierlab models (see the module documentation).
///
/// Ordered by size: `Base4K < Knc64K < Huge2M < Huge1G`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PageSize {
    /// 4 KiB base pages (a PTE leaf).
    #[default]
    #[serde(rename = "4KiB")]
    Base4K,
    /// Knights Corner 64 KiB pages: 16 consecutive, 64 KiB-aligned 4 KiB PTEs with a hint bit,
    /// cached as one TLB entry.
    #[serde(rename = "64KiB")]
    Knc64K,
    /// 2 MiB huge pages (a PMD leaf).
    #[serde(rename = "2MiB")]
    Huge2M,
    /// 1 GiB gigantic pages (a PUD leaf).
    #[serde(rename = "1GiB")]
    Huge1G,
}

impl PageSize {
    /// Every page size, smallest first.
    pub const ALL: [PageSize; 4] = [PageSize::Base4K, PageSize::Knc64K, PageSize::Huge2M, PageSize::Huge1G];

    /// log2 of the page's size in bytes: 12, 16, 21, 30.
    pub const fn shift(self) -> u32 {
        match self {
            PageSize::Base4K => 12,
            PageSize::Knc64K => 16,
            PageSize::Huge2M => 21,
            PageSize::Huge1G => 30,
        }
    }

    /// Bytes in one page.
    pub const fn bytes(self) -> u64 {
        1 << self.shift()
    }

    /// Mask of the offset bits of an address within a page (`bytes() - 1`).
    pub const fn offset_mask(self) -> u64 {
        self.bytes() - 1
    }

    /// How many 4 KiB base pages one page spans: 1, 16, 512, 262144.
    pub const fn base_pages(self) -> u64 {
        self.bytes() >> PAGE_SHIFT
    }

    /// The page-table level that holds the page's leaf entry: 1 (PTE) for 4 KiB and 64 KiB
    /// pages (a 64 KiB page is 16 PTEs), 2 (PMD) for 2 MiB, 3 (PUD) for 1 GiB.
    pub const fn leaf_level(self) -> u8 {
        match self {
            PageSize::Base4K | PageSize::Knc64K => 1,
            PageSize::Huge2M => 2,
            PageSize::Huge1G => 3,
        }
    }

    /// The name used in scenarios, JSON and the CLI: `4KiB`, `64KiB`, `2MiB`, `1GiB`.
    pub const fn name(self) -> &'static str {
        match self {
            PageSize::Base4K => "4KiB",
            PageSize::Knc64K => "64KiB",
            PageSize::Huge2M => "2MiB",
            PageSize::Huge1G => "1GiB",
        }
    }

    /// The page size of `bytes` bytes, if it is one of the four.
    pub const fn from_bytes(bytes: u64) -> Option<PageSize> {
        match bytes {
            b if b == PageSize::Base4K.bytes() => Some(PageSize::Base4K),
            b if b == PageSize::Knc64K.bytes() => Some(PageSize::Knc64K),
            b if b == PageSize::Huge2M.bytes() => Some(PageSize::Huge2M),
            b if b == PageSize::Huge1G.bytes() => Some(PageSize::Huge1G),
            _ => None,
        }
    }

    /// First byte of the page holding `addr` (`addr` rounded down to the page size).
    #[inline]
    pub const fn base(self, addr: u64) -> u64 {
        addr & !self.offset_mask()
    }

    /// Number of the page holding `addr` (`addr >> shift()`).
    #[inline]
    pub const fn number(self, addr: u64) -> u64 {
        addr >> self.shift()
    }

    /// Offset of `addr` within its page.
    #[inline]
    pub const fn offset(self, addr: u64) -> u64 {
        addr & self.offset_mask()
    }

    /// First byte of page number `number` (the inverse of [`PageSize::number`]); `None` when
    /// it lies beyond the 64-bit address space.
    #[inline]
    pub const fn addr_of(self, number: u64) -> Option<u64> {
        if number > (u64::MAX >> self.shift()) {
            None
        } else {
            Some(number << self.shift())
        }
    }

    /// True when `addr` is the first byte of a page.
    #[inline]
    pub const fn is_aligned(self, addr: u64) -> bool {
        self.offset(addr) == 0
    }

    /// `addr` rounded up to a page boundary; `None` when that overflows 64 bits.
    #[inline]
    pub const fn align_up(self, addr: u64) -> Option<u64> {
        match addr.checked_add(self.offset_mask()) {
            Some(a) => Some(self.base(a)),
            None => None,
        }
    }

    /// Pages needed to cover `len` bytes (rounded up).
    #[inline]
    pub const fn pages_for(self, len: u64) -> u64 {
        len.div_ceil(self.bytes())
    }
}

impl fmt::Display for PageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A string that is not one of the page-size names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsePageSizeError(pub String);

impl fmt::Display for ParsePageSizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "page size {:?}: expected one of 4KiB, 64KiB, 2MiB, 1GiB", self.0)
    }
}

impl std::error::Error for ParsePageSizeError {}

impl FromStr for PageSize {
    type Err = ParsePageSizeError;

    /// Parse `4KiB`, `64KiB`, `2MiB` or `1GiB` (exactly the serde names).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PageSize::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| ParsePageSizeError(s.to_string()))
    }
}

/// First byte of the page of `page_bytes` bytes (a power of two) holding `addr`.
#[inline]
pub const fn page_base(addr: u64, page_bytes: u64) -> u64 {
    debug_assert!(page_bytes.is_power_of_two());
    addr & !(page_bytes - 1)
}

/// Number of the page of `page_bytes` bytes (a power of two) holding `addr`.
#[inline]
pub const fn page_number(addr: u64, page_bytes: u64) -> u64 {
    debug_assert!(page_bytes.is_power_of_two());
    addr >> page_bytes.trailing_zeros()
}

/// Offset of `addr` within its page of `page_bytes` bytes (a power of two).
#[inline]
pub const fn page_offset(addr: u64, page_bytes: u64) -> u64 {
    debug_assert!(page_bytes.is_power_of_two());
    addr & (page_bytes - 1)
}

/// Mask of the offset within a base page.
pub const PAGE_MASK: u64 = PAGE_SIZE - 1;
/// Mask of the offset within a 2 MiB page.
pub const HUGE_MASK: u64 = HUGE_SIZE - 1;
/// Base pages in a 2 MiB page.
pub const PAGES_PER_HUGE: u64 = HUGE_SIZE / PAGE_SIZE;

/// Base page number of `addr` (`addr >> 12`).
#[inline]
pub const fn vpn(addr: u64) -> u64 {
    addr >> PAGE_SHIFT
}

/// First byte of base page number `vpn`.
#[inline]
pub const fn page_addr(vpn: u64) -> u64 {
    vpn << PAGE_SHIFT
}

/// Number of base pages needed to hold `bytes`.
#[inline]
pub const fn pages_for(bytes: u64) -> u64 {
    bytes.div_ceil(PAGE_SIZE)
}

/// Bytes of `pages` base pages.
#[inline]
pub const fn bytes_of(pages: u64) -> u64 {
    pages << PAGE_SHIFT
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
