! Fortran ALLOCATE as an allocation site (tests/test_alloc_sites.py): 1000 doubles, each
! written once and read once (sum).
program allocate_site
  implicit none
  real(8), allocatable :: a(:)
  integer :: i
  allocate(a(1000))
  do i = 1, 1000
    a(i) = i
  end do
  print *, sum(a)
  deallocate(a)
end program allocate_site
