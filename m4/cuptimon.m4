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

# CPTM_CHECK_CUDA: --with-cuda=DIR (default /usr/local/cuda); needs the CUPTI
# headers.  libcupti itself is never linked: the shim resolves it at run time.
AC_DEFUN([CPTM_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=DIR], [CUDA toolkit with CUPTI headers @<:@/usr/local/cuda@:>@])],
    [], [with_cuda=/usr/local/cuda])
  AS_IF([test "x$with_cuda" = xno], [AC_MSG_ERROR([cuptimon needs the CUDA toolkit's CUPTI headers; --without-cuda is not supported])])
  CUDA_DIR=$with_cuda
  cptm_cupti_inc=
  for d in "$CUDA_DIR/include" "$CUDA_DIR/extras/CUPTI/include" "$CUDA_DIR/targets/x86_64-linux/include"; do
    AS_IF([test -f "$d/cupti_activity.h"], [cptm_cupti_inc=$d; break])
  done
  AC_MSG_CHECKING([for CUPTI headers under $CUDA_DIR])
  AS_IF([test -n "$cptm_cupti_inc"], [AC_MSG_RESULT([$cptm_cupti_inc])],
        [AC_MSG_RESULT([no])
         AC_MSG_ERROR([cupti_activity.h not found under $CUDA_DIR (include, extras/CUPTI/include).
Install the CUDA toolkit (it ships CUPTI) or pass --with-cuda=DIR.])])
  CUDA_CFLAGS="-I$cptm_cupti_inc"
  AS_IF([test "$cptm_cupti_inc" != "$CUDA_DIR/include" && test -f "$CUDA_DIR/include/cuda.h"],
        [CUDA_CFLAGS="$CUDA_CFLAGS -I$CUDA_DIR/include"])
  cptm_save_CPPFLAGS=$CPPFLAGS
  CPPFLAGS="$CPPFLAGS $CUDA_CFLAGS"
  AC_CHECK_HEADER([cupti.h], [], [AC_MSG_ERROR([cupti.h under $cptm_cupti_inc does not compile; is the CUDA toolkit complete?])])
  CPPFLAGS=$cptm_save_CPPFLAGS
  AC_PATH_PROG([NVCC], [nvcc], [], [$CUDA_DIR/bin])
  AC_SUBST([CUDA_DIR])
  AC_SUBST([CUDA_CFLAGS])
])
