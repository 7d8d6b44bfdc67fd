# cuptimon autoconf macros.

# CPTM_PROBE_CFLAGS(VAR, FLAGS...): append to VAR each flag the C compiler
# accepts (with -Werror so that "unknown warning option" counts as a no).
AC_DEFUN([CPTM_PROBE_CFLAGS], [
  for cptm_flag in $2; do
    AS_VAR_PUSHDEF([cptm_cv], [cptm_cv_cflag_$cptm_flag])
    AC_CACHE_CHECK([whether $CC accepts $cptm_flag], [cptm_cv], [
      cptm_save_CFLAGS=$CFLAGS
      CFLAGS="$CFLAGS -Werror $cptm_flag"
      AC_COMPILE_IFELSE([AC_LANG_PROGRAM([], [return 0;])],
                        [AS_VAR_SET([cptm_cv], [yes])], [AS_VAR_SET([cptm_cv], [no])])
      CFLAGS=$cptm_save_CFLAGS])
    AS_VAR_IF([cptm_cv], [yes], [$1="$$1 $cptm_flag"])
    AS_VAR_POPDEF([cptm_cv])
  done
])

# CPTM_CHECK_CUDA: --with-cuda=DIR | --without-cuda.  cuptimon itself needs
# no CUDA header (proto/cupti-abi.h declares the part of CUPTI it uses) and
# never links libcupti.  The toolkit's CUPTI headers are for the tests only:
# the libcupti test double (tests/fakecupti) emits records of the real
# structs, and the ABI, layout and callback-name checks compare the
# project's declarations with them.  They go in CUPTI_TEST_CFLAGS, which
# only test programs use.  Without them those tests are not built and the
# suite says so (tests/unit/no-cupti-headers.sh).
AC_DEFUN([CPTM_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=DIR],
      [CUDA toolkit whose CUPTI headers the tests compare against and build the libcupti test double with; cuptimon itself is built without them @<:@/usr/local/cuda, when it has them@:>@])
AS_HELP_STRING([--without-cuda],
      [use no CUDA toolkit at all (a distribution build): the tests that need CUPTI headers are skipped])],
    [], [with_cuda=auto])
  CUDA_DIR=
  CUPTI_TEST_CFLAGS=
  cptm_cupti_inc=
  AS_CASE([$with_cuda],
    [no], [],
    [yes|auto], [CUDA_DIR=/usr/local/cuda],
    [CUDA_DIR=$with_cuda])
  AS_IF([test -n "$CUDA_DIR"], [
    for d in "$CUDA_DIR/include" "$CUDA_DIR/extras/CUPTI/include" "$CUDA_DIR/targets/x86_64-linux/include"; do
      AS_IF([test -f "$d/cupti_activity.h"], [cptm_cupti_inc=$d; break])
    done
    AC_MSG_CHECKING([for CUPTI headers under $CUDA_DIR (for the tests)])
    AS_IF([test -n "$cptm_cupti_inc"], [AC_MSG_RESULT([$cptm_cupti_inc])],
      [AC_MSG_RESULT([no])
       AS_IF([test "x$with_cuda" = xauto],
         [AC_MSG_WARN([no CUPTI headers under $CUDA_DIR: cuptimon builds without them, but the tests that need them (the libcupti test double, the integration tests) are skipped; pass --with-cuda=DIR to run them, or --without-cuda to say so])
          CUDA_DIR=],
         [AC_MSG_ERROR([--with-cuda=$with_cuda: cupti_activity.h not found under $CUDA_DIR (include, extras/CUPTI/include, targets/x86_64-linux/include).
Give the CUDA toolkit's directory, or --without-cuda to build and test without one.])])])
  ])
  AS_IF([test -n "$cptm_cupti_inc"], [
    CUPTI_TEST_CFLAGS="-I$cptm_cupti_inc"
    AS_IF([test "$cptm_cupti_inc" != "$CUDA_DIR/include" && test -f "$CUDA_DIR/include/cuda.h"],
          [CUPTI_TEST_CFLAGS="$CUPTI_TEST_CFLAGS -I$CUDA_DIR/include"])
    cptm_save_CPPFLAGS=$CPPFLAGS
    CPPFLAGS="$CPPFLAGS $CUPTI_TEST_CFLAGS"
    AC_CHECK_HEADER([cupti.h], [], [AC_MSG_ERROR([cupti.h under $cptm_cupti_inc does not compile; is the CUDA toolkit complete? (--without-cuda builds without it)])])
    CPPFLAGS=$cptm_save_CPPFLAGS
    AC_PATH_PROG([NVCC], [nvcc], [], [$CUDA_DIR/bin])
  ])
  AM_CONDITIONAL([HAVE_CUPTI_HEADERS], [test -n "$cptm_cupti_inc"])
  AC_SUBST([CUDA_DIR])
  AC_SUBST([CUPTI_TEST_CFLAGS])
])
