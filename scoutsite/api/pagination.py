"""Pagination for every list: ``?page=`` and ``?page_size=`` (at most MAX_PAGE_SIZE)."""

from rest_framework.pagination import PageNumberPagination

MAX_PAGE_SIZE = 200


class Pagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE
