noinst_LTLIBRARIES += proto/libcuptimon-proto.la
proto_libcuptimon_proto_la_SOURCES = proto/proto.c proto/sock.c proto/kinds.c proto/outfile.c \
	proto/layouts.c proto/layouts.h proto/util.c proto/util.h proto/cuptimon-proto.h proto/cupti-abi.h proto/nccl-abi.h
