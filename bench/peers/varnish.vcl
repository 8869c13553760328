vcl 4.1;
# Varnish with the default VCL logic and a malloc store. Placeholders: @ORIGIN@
backend origin {
    .host = "127.0.0.1";
    .port = "@ORIGIN@";
}
sub vcl_deliver {
    if (obj.hits > 0) {
        set resp.http.X-Cache = "HIT";
    } else {
        set resp.http.X-Cache = "MISS";
    }
}
